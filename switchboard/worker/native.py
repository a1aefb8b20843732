"""SGLang's native endpoints: ``/generate``, ``/encode``, health and info.

``/generate`` streams server-sent events whose ``text`` is the whole text so far (SGLang's
default, non-incremental streaming), each with ``meta_info``; the stream ends with
``data: [DONE]``. A batched request (``text`` or ``input_ids`` given as a list) answers a
list, or, streaming, events that carry the prompt's ``index``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from fastapi import APIRouter, Request, Response

from router_core.wire.requests import SamplingParams
from switchboard.worker.caps import prompt_count
from switchboard.worker.concurrently import merge_streams, run_all
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.disconnect import unless_disconnected
from switchboard.worker.errors import stream_error
from switchboard.worker.generation import (
    Generation,
    Prompt,
    PromptError,
    TextChunk,
    TextResult,
)
from switchboard.worker.health_probe import probe_generation
from switchboard.worker.json_body import JsonBodyRoute
from switchboard.worker.logprobs import TokenLogprob, sglang_shape
from switchboard.worker.native_sampling import samples_per_prompt, wire_sampling
from switchboard.worker.schemas import EncodeBody, GenerateBody
from switchboard.worker.settings import WORKER_HEADER, WorkerSettings
from switchboard.worker.sse import DONE, event, sse_response

__all__ = ["logprob_asks", "request_ids", "router"]

router = APIRouter(tags=["native"], route_class=JsonBodyRoute)


def request_ids(given: str | list[str] | None, count: int, generation: Generation) -> list[str]:
    """One request id per prompt: the client's (one, or one per prompt) or fresh ones."""
    if given is None:
        return [generation.new_rid() for _ in range(count)]
    rids = [given] if isinstance(given, str) else list(given)
    if len(rids) != count:
        raise PromptError(f"rid names {len(rids)} requests for {count} prompts")
    if len(set(rids)) != len(rids) or not all(rids):
        raise PromptError("rid values must be non-empty and distinct")
    if any(rid in generation.link.session.inflight for rid in rids):
        raise PromptError("a request with this rid is already in flight")
    return rids


def _prompt_field(body: GenerateBody | EncodeBody) -> str:
    return "text" if body.text is not None else "input_ids"


def _each(value: Any, count: int, name: str) -> list[Any]:
    """SGLang's one-or-each form as one value per prompt."""
    if not isinstance(value, list):
        return [value] * count
    if len(value) != count:
        raise PromptError(f"{name} gives {len(value)} values for {count} prompts", name)
    return value


def logprob_asks(body: GenerateBody, count: int, generation: Generation) -> list[int | None]:
    """Per prompt: None (no logprobs), or the alternatives per token asked for.
    Refuses (400) prompt logprobs, and logprobs from an engine without them."""
    wanted = _each(body.return_logprob, count, "return_logprob")
    tops = _each(body.top_logprobs_num, count, "top_logprobs_num")
    starts = _each(body.logprob_start_len, count, "logprob_start_len")
    if not any(wanted):
        return [None] * count
    if any(start is not None and start >= 0 for start in starts):
        raise PromptError(
            "logprob_start_len: prompt logprobs are not supported by this server; send -1 "
            "(output tokens only)",
            "logprob_start_len",
        )
    generation.check_logprobs("return_logprob")
    return [(top or 0) if asked else None for asked, top in zip(wanted, tops, strict=True)]


def _with_logprobs(
    meta: dict[str, Any],
    logprobs: Sequence[TokenLogprob],
    ask: int | None,
    body: GenerateBody,
    generation: Generation,
) -> dict[str, Any]:
    if ask is None:
        return meta
    decode = generation.token_text
    return {
        **meta,
        **sglang_shape(logprobs, decode, with_text=body.return_text_in_logprobs, top=ask),
    }


def _is_batch(source: Any) -> bool:
    return isinstance(source, list) and bool(source) and not isinstance(source[0], int)


def _meta(
    rid: str, chunk: TextChunk | TextResult, latency_s: float | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": chunk.finish_reason,
        "prompt_tokens": chunk.prompt_tokens,
        "completion_tokens": chunk.completion_tokens,
        "cached_tokens": chunk.cached_tokens,
        "weight_version": chunk.weight_version,
    }
    if latency_s is not None:
        meta["e2e_latency"] = latency_s
    return meta


def _sample_rids(rids: list[str], n: int) -> list[str]:
    """Request ids of ``n`` samples of each prompt, in SGLang's order (sample by sample,
    prompt by prompt within one); a prompt's rid gets ``_<sample>`` appended."""
    if n == 1:
        return rids
    return [f"{rid}_{sample}" for sample in range(n) for rid in rids]


@router.post("/generate", response_model=None)
async def generate(
    body: GenerateBody, request: Request, generation: GenerationDep, settings: SettingsDep
) -> Any:
    """Generate text for one prompt or a batch (SGLang's ``/generate``); ``n`` samples of
    each, answered as a batch (sample by sample) when ``n`` > 1."""
    source = body.text if body.text is not None else body.input_ids
    assert source is not None
    caps = settings.caps
    params = body.sampling_params
    n = samples_per_prompt(params)
    caps.check_n(n)
    caps.check_generations(prompt_count(source), param=_prompt_field(body), n=n)
    prompts = await generation.read_prompts(source)
    if isinstance(params, list):
        if len(params) != len(prompts):
            raise PromptError(f"{len(params)} sampling_params for {len(prompts)} prompts")
        wire = [
            wire_sampling(p, f"sampling_params.{index}", generation, settings)
            for index, p in enumerate(params)
        ]
        for index, sampling in enumerate(wire):
            caps.check_stop(sampling.stop, sampling.stop_token_ids, at=f"sampling_params.{index}")
    else:
        wire = [wire_sampling(params, "sampling_params", generation, settings)] * len(prompts)
        caps.check_stop(wire[0].stop, wire[0].stop_token_ids, at="sampling_params")
    rids = _sample_rids(request_ids(body.rid, len(prompts), generation), n)
    tokens = 0
    for prompt, sampling in zip(prompts, wire, strict=True):
        generation.check_length(prompt, sampling.max_new_tokens, param=_prompt_field(body))
        tokens += len(prompt.ids) + sampling.max_new_tokens
    caps.check_tokens(tokens * n, len(prompts) * n)
    batched = _is_batch(source) or n > 1
    asks = logprob_asks(body, len(prompts), generation) * n
    prompts, wire = list(prompts) * n, wire * n
    # Refuse (503) before any byte of a stream is sent; paused requests wait here.
    await unless_disconnected(request, generation.link.wait_admission())
    if body.stream:
        return sse_response(_stream(generation, body, (prompts, wire, rids, asks), batched))
    work = run_all(
        [
            generation.generate_text(prompt, sampling, rid, logprobs=ask)
            for prompt, sampling, rid, ask in zip(prompts, wire, rids, asks, strict=True)
        ]
    )
    finished = await unless_disconnected(request, work)
    results = [
        {
            "text": result.text,
            "meta_info": _with_logprobs(
                _meta(result.rid, result, result.latency_s), result.logprobs, ask, body, generation
            ),
        }
        for result, ask in zip(finished, asks, strict=True)
    ]
    return results if batched else results[0]


async def _stream(
    generation: Generation,
    body: GenerateBody,
    requests: tuple[
        Sequence[Prompt], Sequence[SamplingParams], Sequence[str], Sequence[int | None]
    ],
    batched: bool,
) -> AsyncGenerator[bytes, None]:
    prompts, params, rids, asks = requests
    texts = [""] * len(prompts)
    logprobs: list[list[TokenLogprob]] = [[] for _ in prompts]
    streams = [
        generation.stream_text(prompt, sampling, rid, logprobs=ask)
        for prompt, sampling, rid, ask in zip(prompts, params, rids, asks, strict=True)
    ]
    try:
        async with contextlib.aclosing(merge_streams(streams)) as chunks:
            async for index, chunk in chunks:
                texts[index] += chunk.text
                logprobs[index] += chunk.logprobs
                meta = _meta(rids[index], chunk)
                payload: dict[str, Any] = {
                    "text": texts[index],
                    "meta_info": _with_logprobs(
                        meta, logprobs[index], asks[index], body, generation
                    ),
                }
                if batched:
                    payload["index"] = index
                yield event(payload)
    except Exception as error:  # headers are sent: report in the stream, then end it
        yield event(stream_error(error))
    yield DONE


@router.post("/encode", response_model=None)
async def encode(
    body: EncodeBody, request: Request, generation: GenerationDep, settings: SettingsDep
) -> Any:
    """Embed one prompt or a batch (SGLang's ``/encode``)."""
    source = body.text if body.text is not None else body.input_ids
    assert source is not None
    settings.caps.check_generations(prompt_count(source), param=_prompt_field(body))
    prompts = await generation.read_prompts(source)
    settings.caps.check_tokens(sum(len(prompt.ids) for prompt in prompts), len(prompts))
    rids = request_ids(body.rid, len(prompts), generation)
    work = run_all(
        [generation.embed(prompt, rid) for prompt, rid in zip(prompts, rids, strict=True)]
    )
    embedded = await unless_disconnected(request, work)
    results = [
        {
            "embedding": result.embedding,
            "meta_info": {
                "id": result.rid,
                "finish_reason": result.finish_reason,
                "prompt_tokens": result.prompt_tokens,
            },
        }
        for result in embedded
    ]
    return results if _is_batch(source) else results[0]


@router.get("/health")
async def health(generation: GenerationDep, settings: SettingsDep) -> Response:
    """200 while this worker admits requests or is paused; 503 while starting or draining.
    The ``X-Switchboard-Worker`` header names the worker that answered (the port is shared)."""
    session = generation.link.session
    named = {WORKER_HEADER: settings.worker_id}
    if session.registered and not session.draining and not session.stopping:
        return Response(status_code=200, headers=named)
    headers = {"Retry-After": str(settings.retry_after_s), **named}
    return Response(content=session.state, status_code=503, headers=headers)


@router.get("/health_generate")
async def health_generate(generation: GenerationDep, settings: SettingsDep) -> Response:
    """JSON always: 200 ``ok`` when a one-token generation completes within the health
    timeout, 200 ``paused`` at once while paused, else 503 (:mod:`.health_probe`)."""
    return await probe_generation(generation, settings)


def _model_info(settings: WorkerSettings, generation: Generation) -> dict[str, Any]:
    return {
        "model_path": settings.model_name,
        "tokenizer_path": generation.tokenizer.source,
        "served_model_name": settings.model_name,
        "is_generation": True,
        "context_length": generation.context_length(),
        "vocab_size": generation.tokenizer.vocab_size,
    }


@router.get("/get_model_info")
@router.get("/model_info")
async def get_model_info(generation: GenerationDep, settings: SettingsDep) -> dict[str, Any]:
    """What model this worker serves (SGLang's ``/get_model_info``; ``/model_info`` too)."""
    return _model_info(settings, generation)


def _server_info(settings: WorkerSettings, generation: Generation) -> dict[str, Any]:
    link = generation.link
    return {
        "version": settings.version,
        "worker_id": settings.worker_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "listen": f"{settings.host}:{settings.port}",
        "served_model_name": settings.model_name,
        "context_length": generation.context_length(),
        "default_max_new_tokens": settings.default_max_new_tokens,
        "tokenizer_path": generation.tokenizer.source,
        # The weights serving (a worker that registers after an update learns them from
        # the load snapshot the router sends it with its registration reply).
        "weight_version": (link.load.weight_version if link.load else "") or "default",
        **{"worker": (status := link.status()), "load": status["load"]},
    }


@router.get("/get_server_info")
@router.get("/server_info")
async def get_server_info(generation: GenerationDep, settings: SettingsDep) -> dict[str, Any]:
    """This worker's settings, state and the engine's latest load, read locally
    (SGLang's ``/get_server_info``; ``/server_info`` too)."""
    return _server_info(settings, generation)
