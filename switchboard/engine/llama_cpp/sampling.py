"""Each request's llama.cpp sampler chain, and the log probabilities of what it chose.

:func:`chain_steps` is the pure part: which of llama.cpp's samplers a request's
:class:`~router_core.wire.requests.SamplingParams` asks for, in the order llama.cpp's own
tools apply them — logit bias, penalties, top-k, top-p, min-p, temperature, then a
seeded draw — or logit bias, penalties and greedy when ``temperature`` is 0 (or
``top_k`` is 1). Defaults drop out: no ``logit_bias``, ``top_k`` -1 or 0, ``top_p`` 1,
``min_p`` 0 and no penalties add no sampler.
:class:`SamplerChain` builds that chain in llama.cpp and samples with it; the chain
keeps its own state (the penalties' token history, the draw's random state) across a
pause or a retraction, so a request continues as if never interrupted.

Penalties follow OpenAI and SGLang over the tokens generated so far: ``frequency_penalty``
subtracts itself per occurrence, ``presence_penalty`` once per token seen,
``repetition_penalty`` divides positive logits (and multiplies negative ones).

A request without a ``seed`` draws with a seed of its own from the OS, so two such
requests never share a random stream.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from router_core.wire.requests import SamplingParams
from switchboard.text.llama_runtime import llama_api

__all__ = ["PENALTY_WINDOW", "ChainStep", "SamplerChain", "TokenLogprob", "chain_steps", "logprob"]

#: Generated tokens the penalties look back over (llama.cpp's ``penalty_last_n``).
PENALTY_WINDOW = 256
#: Seeds are llama.cpp's ``uint32_t``; ``0xFFFFFFFF`` means "random" to it.
_SEED_MASK = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One sampler of a chain: its llama.cpp name (``llama_sampler_init_<name>``) and
    arguments."""

    name: str
    args: tuple[float | int, ...] = ()
    #: For ``logit_bias``: (token id, bias) pairs, in id order.
    biases: tuple[tuple[int, float], ...] = ()


def _seed(params: SamplingParams) -> int:
    if params.seed is None:
        return secrets.randbelow(_SEED_MASK)
    return params.seed & _SEED_MASK if params.seed & _SEED_MASK != _SEED_MASK else 0


def chain_steps(params: SamplingParams, n_vocab: int) -> list[ChainStep]:
    """The samplers ``params`` ask for, in order (see the module docstring). Biases of
    ids outside ``0..n_vocab-1`` are left out (the scheduler refuses such a request)."""
    steps: list[ChainStep] = []
    biases = tuple(sorted((t, b) for t, b in params.logit_bias.items() if 0 <= t < n_vocab))
    if biases:
        steps.append(ChainStep("logit_bias", (n_vocab, len(biases)), biases))
    penalised = (
        params.frequency_penalty != 0
        or params.presence_penalty != 0
        or params.repetition_penalty != 1
    )
    if penalised:
        steps.append(
            ChainStep(
                "penalties",
                (
                    n_vocab,
                    PENALTY_WINDOW,
                    params.repetition_penalty,
                    params.frequency_penalty,
                    params.presence_penalty,
                ),
            )
        )
    if params.temperature <= 0 or params.top_k == 1:
        return [*steps, ChainStep("greedy")]
    if params.top_k > 1:
        steps.append(ChainStep("top_k", (params.top_k,)))
    if params.top_p < 1:
        steps.append(ChainStep("top_p", (params.top_p, 1)))
    if params.min_p > 0:
        steps.append(ChainStep("min_p", (params.min_p, 1)))
    steps.append(ChainStep("temp", (params.temperature,)))
    steps.append(ChainStep("dist", (_seed(params),)))
    return steps


class SamplerChain:
    """A llama.cpp sampler chain for one request; :meth:`free` releases it."""

    def __init__(self, params: SamplingParams, n_vocab: int) -> None:
        self._api = llama_api()
        self.steps = chain_steps(params, n_vocab)
        chain_params = self._api.llama_sampler_chain_default_params()
        chain_params.no_perf = True
        self._chain: Any = self._api.llama_sampler_chain_init(chain_params)
        for step in self.steps:
            init = getattr(self._api, f"llama_sampler_init_{step.name}")
            args: tuple[Any, ...] = step.args
            if step.biases:
                # llama.cpp copies the array into the sampler: it need not outlive this.
                pairs = (self._api.llama_logit_bias * len(step.biases))(
                    *(self._api.llama_logit_bias(token, bias) for token, bias in step.biases)
                )
                args = (*step.args, pairs)
            # The chain owns what it holds: freeing the chain frees each sampler.
            self._api.llama_sampler_chain_add(self._chain, init(*args))

    def sample(self, context: Any, index: int) -> int:
        """Sample from the logits of batch entry ``index`` and record the choice."""
        token: int = self._api.llama_sampler_sample(self._chain, context, index)
        return token

    def free(self) -> None:
        """Release the chain (safe to call twice)."""
        if self._chain is not None:
            self._api.llama_sampler_free(self._chain)
            self._chain = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The log probability of a chosen token, and the top alternatives (best first)."""

    token: int
    logprob: float
    top_ids: tuple[int, ...] = ()
    top_logprobs: tuple[float, ...] = ()


def logprob(logits: npt.NDArray[np.float32], token: int, top: int = 0) -> TokenLogprob:
    """Log-softmax of the model's raw ``logits`` at ``token``, and the ``top`` best."""
    values = logits.astype(np.float64)
    peak = float(values.max())
    log_total = peak + float(np.log(np.exp(values - peak).sum()))
    chosen = float(values[token]) - log_total
    if top <= 0:
        return TokenLogprob(token, chosen)
    count = min(top, values.size)
    best = np.argpartition(-values, count - 1)[:count]
    best = best[np.argsort(-values[best], kind="stable")]
    return TokenLogprob(
        token,
        chosen,
        tuple(int(i) for i in best),
        tuple(float(values[i]) - log_total for i in best),
    )
