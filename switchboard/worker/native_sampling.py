"""The wire ``SamplingParams`` of ``/generate``'s ``sampling_params``: pure but for the
engine's load and the vocabulary size, read off the :class:`Generation`."""

from __future__ import annotations

from router_core.wire.requests import SamplingParams
from switchboard.worker.generation import Generation, PromptError
from switchboard.worker.logit_bias import logit_bias_of
from switchboard.worker.schemas import NativeSamplingParams
from switchboard.worker.settings import WorkerSettings

__all__ = ["samples_per_prompt", "sampling_params", "wire_sampling"]


def sampling_params(
    params: NativeSamplingParams,
    default_max_new_tokens: int,
    logit_bias: dict[int, float] | None = None,
) -> SamplingParams:
    """The wire ``SamplingParams`` of a native ``sampling_params`` object (``logit_bias``:
    its ``logit_bias`` as :func:`~switchboard.worker.logit_bias.logit_bias_of` made it)."""
    stop = [params.stop] if isinstance(params.stop, str) else list(params.stop or [])
    return SamplingParams(
        max_new_tokens=(
            default_max_new_tokens if params.max_new_tokens is None else params.max_new_tokens
        ),
        min_new_tokens=params.min_new_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        min_p=params.min_p,
        frequency_penalty=params.frequency_penalty,
        presence_penalty=params.presence_penalty,
        repetition_penalty=params.repetition_penalty,
        stop=stop,
        stop_token_ids=list(params.stop_token_ids or []),
        ignore_eos=params.ignore_eos,
        skip_special_tokens=params.skip_special_tokens,
        spaces_between_special_tokens=params.spaces_between_special_tokens,
        no_stop_trim=params.no_stop_trim,
        seed=params.seed,
        logit_bias=logit_bias or {},
    )


def wire_sampling(
    params: NativeSamplingParams, at: str, generation: Generation, settings: WorkerSettings
) -> SamplingParams:
    """One prompt's wire ``SamplingParams``, its ``logit_bias`` checked and its
    ``min_new_tokens`` no more than its ``max_new_tokens``, as SGLang requires (``at``:
    where the object is in the body)."""
    bias = logit_bias_of(
        params.logit_bias,
        generation.link.load,
        generation.tokenizer.vocab_size,
        f"{at}.logit_bias",
    )
    wire = sampling_params(params, settings.default_max_new_tokens, bias)
    if wire.min_new_tokens > wire.max_new_tokens:
        raise PromptError(
            f"{at}.min_new_tokens: {wire.min_new_tokens} is more than max_new_tokens "
            f"({wire.max_new_tokens})",
            f"{at}.min_new_tokens",
        )
    return wire


def samples_per_prompt(params: NativeSamplingParams | list[NativeSamplingParams]) -> int:
    """SGLang's ``n``: one value for the whole request, whichever form it is given in."""
    each = params if isinstance(params, list) else [params]
    counts = {p.n for p in each}
    if len(counts) > 1:
        raise PromptError("sampling_params.n must be the same for every prompt")
    return counts.pop() if counts else 1
