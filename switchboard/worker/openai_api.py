"""OpenAI-compatible endpoints: ``/v1/completions``, ``/v1/models``, ``/v1/embeddings``.

The shapes are the OpenAI API's, so the official ``openai`` SDK works unchanged: choices
indexed prompt by prompt (``n`` per prompt), ``usage`` on every answer (and, streaming,
in a last chunk when ``stream_options.include_usage`` is set), ``finish_reason`` from
the engine (``length``, ``stop``, or ``abort`` when a pause in abort mode ended the
request). ``encoding_format: base64`` embeddings are little-endian float32, which is
what the SDK asks for by default and decodes.
"""

from __future__ import annotations

import base64
import contextlib
import struct
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from fastapi import APIRouter, Request

from router_core.wire.finish import FinishReason
from router_core.wire.requests import SamplingParams
from switchboard.worker.caps import prompt_count
from switchboard.worker.chat_schemas import ChatBody
from switchboard.worker.concurrently import merge_streams, run_all
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.disconnect import unless_disconnected
from switchboard.worker.errors import ModelNotFound, stream_error
from switchboard.worker.generation import (
    Generation,
    Prompt,
    PromptError,
    RequestAborted,
)
from switchboard.worker.json_body import JsonBodyRoute
from switchboard.worker.logit_bias import logit_bias_of
from switchboard.worker.logprobs import TokenLogprob, completion_shape
from switchboard.worker.schemas import CompletionBody, EmbeddingBody
from switchboard.worker.settings import WorkerSettings
from switchboard.worker.sse import DONE, event, sse_response

__all__ = ["MODEL_ALIASES", "check_model", "finish_reason", "router", "sampling", "usage"]

router = APIRouter(prefix="/v1", tags=["openai"], route_class=JsonBodyRoute)

#: When the model was "created", as ``/v1/models`` reports it: the worker's start.
_STARTED = int(time.time())


def finish_reason(reason: dict[str, Any] | None) -> str | None:
    """OpenAI's ``finish_reason`` of an engine finish reason (``stop``, ``length``, ``abort``)."""
    if reason is None:
        return None
    kind = FinishReason.of(reason).type
    return "stop" if kind is None else kind


#: Model names every worker answers to besides its served name: SGLang's clients and
#: tools send ``default`` for "whatever is served".
MODEL_ALIASES = frozenset({"default"})


def check_model(model: str, settings: WorkerSettings) -> None:
    """Refuse (404, :class:`ModelNotFound`) a model name that is neither the served one
    nor an alias in :data:`MODEL_ALIASES`; the answer always names the served model."""
    if model != settings.model_name and model not in MODEL_ALIASES:
        raise ModelNotFound(
            f"the model {model!r} does not exist; this server serves {settings.model_name!r} "
            "(also answering to 'default')"
        )


def sampling(
    body: CompletionBody | ChatBody, max_new_tokens: int, generation: Generation
) -> SamplingParams:
    """The wire ``SamplingParams`` of an OpenAI body (completion or chat: they share
    their sampling fields, SGLang's extensions included); its ``logit_bias`` is refused
    (400) unless the engine applies it (:mod:`switchboard.worker.logit_bias`)."""
    bias = logit_bias_of(
        body.logit_bias, generation.link.load, generation.tokenizer.vocab_size, "logit_bias"
    )
    if body.min_tokens > max_new_tokens:
        raise PromptError(
            f"min_tokens: {body.min_tokens} is more than the tokens asked for ({max_new_tokens})",
            "min_tokens",
        )
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    return SamplingParams(
        max_new_tokens=max_new_tokens,
        min_new_tokens=body.min_tokens,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=body.top_k,
        min_p=body.min_p,
        frequency_penalty=body.frequency_penalty,
        presence_penalty=body.presence_penalty,
        repetition_penalty=body.repetition_penalty,
        stop=stop,
        stop_token_ids=list(body.stop_token_ids or []),
        ignore_eos=body.ignore_eos,
        skip_special_tokens=body.skip_special_tokens,
        spaces_between_special_tokens=body.spaces_between_special_tokens,
        no_stop_trim=body.no_stop_trim,
        seed=body.seed,
        logit_bias=bias,
    )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's ``usage`` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@router.get("/models")
async def list_models(settings: SettingsDep, generation: GenerationDep) -> dict[str, Any]:
    """The one model this stack serves."""
    return {"object": "list", "data": [_model_card(settings, generation)]}


@router.get("/models/{model}")
async def retrieve_model(
    model: str, settings: SettingsDep, generation: GenerationDep
) -> dict[str, Any]:
    """One model by name; 404 for any other name."""
    check_model(model, settings)
    return _model_card(settings, generation)


def _model_card(settings: WorkerSettings, generation: Generation) -> dict[str, Any]:
    return {
        "id": settings.model_name,
        "object": "model",
        "created": _STARTED,
        "owned_by": "switchboard",
        "root": settings.model_name,
        "max_model_len": generation.context_length(),
        "context_length": generation.context_length(),
    }


@router.post("/completions", response_model=None)
async def create_completion(
    body: CompletionBody, request: Request, generation: GenerationDep, settings: SettingsDep
) -> Any:
    """Complete each prompt ``n`` times (OpenAI's ``/v1/completions``)."""
    check_model(body.model, settings)
    caps = settings.caps
    caps.check_n(body.n)
    caps.check_generations(prompt_count(body.prompt), param="prompt", n=body.n)
    prompts = await generation.read_prompts(body.prompt)
    params = sampling(body, body.max_tokens or 16, generation)
    caps.check_stop(params.stop, params.stop_token_ids, at="")
    if body.logprobs is not None:
        generation.check_logprobs("logprobs")
    for prompt in prompts:
        generation.check_length(prompt, params.max_new_tokens, param="prompt")
    tokens = sum(len(prompt.ids) + params.max_new_tokens for prompt in prompts) * body.n
    caps.check_tokens(tokens, len(prompts) * body.n)
    # One choice per (prompt, sample): choice index = prompt index * n + sample.
    choices = [prompt for prompt in prompts for _ in range(body.n)]
    rids = [generation.new_rid() for _ in choices]
    completion_id = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    await unless_disconnected(request, generation.link.wait_admission())
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = _stream(
            generation,
            body,
            choices=choices,
            params=params,
            rids=rids,
            completion_id=completion_id,
            created=created,
            include_usage=include_usage,
        )
        return sse_response(events)
    work = run_all(
        [
            generation.generate_text(prompt, params, rid, logprobs=body.logprobs)
            for prompt, rid in zip(choices, rids, strict=True)
        ]
    )
    results = await unless_disconnected(request, work)
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": created,
        "model": settings.model_name,
        "choices": [
            {
                "index": index,
                "text": _echo(body, prompt) + result.text,
                "logprobs": _logprobs(body, generation, result.logprobs, len(_echo(body, prompt))),
                "finish_reason": finish_reason(result.finish_reason),
                "matched_stop": (result.finish_reason or {}).get("matched"),
            }
            for index, (prompt, result) in enumerate(zip(choices, results, strict=True))
        ],
        "usage": usage(
            sum(len(prompt.ids) for prompt in prompts),
            sum(result.completion_tokens for result in results),
        ),
    }


def _logprobs(
    body: CompletionBody, generation: Generation, tokens: list[TokenLogprob], offset: int
) -> dict[str, Any] | None:
    """A choice's ``logprobs``, None unless asked for (``offset``: where the generated
    text starts in the choice's, after an echoed prompt)."""
    if body.logprobs is None:
        return None
    return completion_shape(tokens, generation.token_text, top=body.logprobs, offset=offset)


def _echo(body: CompletionBody, prompt: Prompt) -> str:
    if not body.echo:
        return ""
    return prompt.text if prompt.text is not None else ""


async def _stream(
    generation: Generation,
    body: CompletionBody,
    *,
    choices: Sequence[Prompt],
    params: SamplingParams,
    rids: Sequence[str],
    completion_id: str,
    created: int,
    include_usage: bool,
) -> AsyncGenerator[bytes, None]:
    model = generation.settings.model_name
    completion_tokens = [0] * len(choices)

    def chunk(index: int, text: str, reason: str | None, logprobs: Any) -> bytes:
        choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}
        return event(
            {
                "id": completion_id,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
            }
        )

    streams = [
        generation.stream_text(prompt, params, rid, logprobs=body.logprobs)
        for prompt, rid in zip(choices, rids, strict=True)
    ]
    #: Characters of each choice's text sent so far: where its next token's offset starts.
    sent = [0] * len(choices)
    echoed = [False] * len(choices)
    try:
        async with contextlib.aclosing(merge_streams(streams)) as parts:
            async for index, part in parts:
                prefix = ""
                if not echoed[index]:
                    echoed[index] = True
                    prefix = _echo(body, choices[index])
                completion_tokens[index] = part.completion_tokens
                shown = _logprobs(body, generation, part.logprobs, sent[index] + len(prefix))
                sent[index] += len(prefix) + len(part.text)
                yield chunk(index, prefix + part.text, finish_reason(part.finish_reason), shown)
    except Exception as error:  # headers are sent: report in the stream, then end it
        yield event(stream_error(error))
    if include_usage:
        prompt_tokens = sum(len(prompt.ids) for prompt in choices[:: body.n])
        counts = usage(prompt_tokens, sum(completion_tokens))
        yield event(
            {
                "id": completion_id,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [],
                "usage": counts,
            }
        )
    yield DONE


@router.post("/embeddings")
async def create_embeddings(
    body: EmbeddingBody, request: Request, generation: GenerationDep, settings: SettingsDep
) -> dict[str, Any]:
    """Embed each input (OpenAI's ``/v1/embeddings``), batched through the engine."""
    check_model(body.model, settings)
    settings.caps.check_generations(prompt_count(body.input), param="input")
    prompts = await generation.read_prompts(body.input)
    settings.caps.check_tokens(sum(len(prompt.ids) for prompt in prompts), len(prompts))
    work = run_all([generation.embed(prompt, generation.new_rid()) for prompt in prompts])
    results = await unless_disconnected(request, work)
    aborted = [result for result in results if finish_reason(result.finish_reason) == "abort"]
    if aborted:
        raise RequestAborted("the embedding request was aborted (a pause in abort mode)")
    return {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": index,
                "embedding": _encode_vector(result.embedding, body.encoding_format),
            }
            for index, result in enumerate(results)
        ],
        "model": settings.model_name,
        "usage": {
            "prompt_tokens": sum(result.prompt_tokens for result in results),
            "total_tokens": sum(result.prompt_tokens for result in results),
        },
    }


def _encode_vector(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
