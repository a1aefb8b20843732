"""``POST /v1/chat/completions``: OpenAI's chat API over the model's chat template.

The messages are rendered by the worker's chat template (``app.state.chat_template``,
:mod:`switchboard.worker.chat_prompt`), tokenized, and generated ``n`` times like a
completion. Shapes are OpenAI's, so the ``openai`` SDK works unchanged: one choice per
sample with an ``assistant`` message, ``usage`` on every answer and, streaming, chunks of
``delta`` s (the role first, then the content, then the finish) ended by ``[DONE]``,
with a last usage chunk under ``stream_options.include_usage``.

Without ``max_tokens``/``max_completion_tokens`` a completion may take the worker's
``default_max_new_tokens``, or what is left of the context after the prompt when that
is less; a prompt that leaves nothing, or an explicit maximum that does not fit, is a 400
with OpenAI's code ``context_length_exceeded`` naming ``messages``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from fastapi import APIRouter, Request

from router_core.wire.requests import SamplingParams
from switchboard.worker.chat_prompt import ChatEncoder, Renderer, render_chat
from switchboard.worker.chat_schemas import ChatBody
from switchboard.worker.concurrently import merge_streams, run_all
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.disconnect import unless_disconnected
from switchboard.worker.errors import stream_error
from switchboard.worker.generation import (
    LARGE_INPUT_CHARS,
    ContextTooLong,
    Generation,
    Prompt,
    PromptError,
)
from switchboard.worker.json_body import JsonBodyRoute
from switchboard.worker.logprobs import TokenLogprob, chat_shape
from switchboard.worker.openai_api import check_model, finish_reason, sampling, usage
from switchboard.worker.sse import DONE, event, sse_response

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["openai"], route_class=JsonBodyRoute)


def _prompt(template: Renderer, encoder: ChatEncoder, body: ChatBody) -> Prompt:
    rendered = render_chat(template, body)
    ids = encoder.encode(rendered, [message.text() for message in body.messages])
    if not ids:
        raise PromptError("the chat template rendered the messages as an empty prompt")
    return Prompt(ids=ids, text=rendered)


async def chat_prompt(request: Request, body: ChatBody, generation: Generation) -> Prompt:
    """The request's prompt, rendered and tokenized in a thread when the conversation is
    long (so other streams keep running); :class:`PromptError` when there is no template,
    it refuses the messages, or the rendering is too long for the context."""
    state = request.app.state
    template: Renderer | None = getattr(state, "chat_template", None)
    if template is None:
        raise PromptError(
            "this model has no chat template; start the workers with --chat-template FILE, "
            "or use /v1/completions"
        )
    encoder: ChatEncoder | None = getattr(state, "chat_encoder", None)
    if encoder is None or encoder.tokenizer is not generation.tokenizer:
        encoder = state.chat_encoder = ChatEncoder(generation.tokenizer)
    chars = sum(len(message.text() or "") for message in body.messages)
    limit = generation.settings.context_length * generation.tokenizer.max_token_chars
    if chars > limit:
        raise ContextTooLong(
            f"the messages ({chars} characters) cannot fit the context length of "
            f"{generation.settings.context_length} tokens",
            "messages",
        )
    if chars < LARGE_INPUT_CHARS:
        return _prompt(template, encoder, body)
    return await asyncio.to_thread(_prompt, template, encoder, body)


def _max_new_tokens(body: ChatBody, prompt: Prompt, generation: Generation) -> int:
    asked = body.max_new_tokens
    if asked is not None:
        generation.check_length(prompt, asked, param="messages")
        return asked
    room = generation.context_length() - len(prompt.ids)
    if room < 1:
        raise ContextTooLong(
            f"the messages ({len(prompt.ids)} tokens) fill the context length of "
            f"{generation.context_length()} tokens, leaving none to generate",
            "messages",
        )
    return min(generation.settings.default_max_new_tokens, room)


@router.post("/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatBody, request: Request, generation: GenerationDep, settings: SettingsDep
) -> Any:
    """Answer the conversation ``n`` times (OpenAI's ``/v1/chat/completions``)."""
    check_model(body.model, settings)
    caps = settings.caps
    caps.check_n(body.n)
    caps.check_generations(1, param="messages", n=body.n)
    if body.logprobs:
        generation.check_logprobs("logprobs")
    elif body.top_logprobs:
        raise PromptError("top_logprobs needs logprobs: true", "top_logprobs")
    asked = (body.top_logprobs or 0) if body.logprobs else None
    prompt = await chat_prompt(request, body, generation)
    params = sampling(body, _max_new_tokens(body, prompt, generation), generation)
    caps.check_stop(params.stop, params.stop_token_ids, at="")
    caps.check_tokens((len(prompt.ids) + params.max_new_tokens) * body.n, body.n)
    rids = [generation.new_rid() for _ in range(body.n)]
    reply = _Reply(
        f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), settings.model_name, generation, asked
    )
    await unless_disconnected(request, generation.link.wait_admission())
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = _stream(generation, prompt, params, rids, reply=reply, include_usage=include_usage)
        return sse_response(events)
    work = run_all([generation.generate_text(prompt, params, rid, logprobs=asked) for rid in rids])
    results = await unless_disconnected(request, work)
    return {
        **reply.head("chat.completion"),
        "choices": [
            {
                "index": index,
                "message": {"role": "assistant", "content": result.text},
                "logprobs": reply.logprobs(result.logprobs),
                "finish_reason": finish_reason(result.finish_reason),
                "matched_stop": (result.finish_reason or {}).get("matched"),
            }
            for index, result in enumerate(results)
        ],
        "usage": usage(len(prompt.ids), sum(result.completion_tokens for result in results)),
    }


class _Reply:
    """What every object of one answer repeats, and how its logprobs are shown
    (``asked``: None for none, else the alternatives per token)."""

    def __init__(
        self, reply_id: str, created: int, model: str, generation: Generation, asked: int | None
    ) -> None:
        self.id, self.created, self.model = reply_id, created, model
        self.generation, self.asked = generation, asked

    def head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def logprobs(self, tokens: Sequence[TokenLogprob]) -> dict[str, Any] | None:
        if self.asked is None:
            return None
        return chat_shape(tokens, self.generation.token_text, top=self.asked)

    def chunk(
        self,
        index: int,
        delta: dict[str, Any],
        reason: str | None = None,
        tokens: Sequence[TokenLogprob] = (),
    ) -> bytes:
        shown = self.logprobs(tokens) if tokens else None
        choice = {"index": index, "delta": delta, "logprobs": shown, "finish_reason": reason}
        return event({**self.head("chat.completion.chunk"), "choices": [choice]})


async def _stream(
    generation: Generation,
    prompt: Prompt,
    params: SamplingParams,
    rids: Sequence[str],
    *,
    reply: _Reply,
    include_usage: bool,
) -> AsyncGenerator[bytes, None]:
    completion_tokens = [0] * len(rids)
    for index in range(len(rids)):
        yield reply.chunk(index, {"role": "assistant", "content": ""})
    streams = [generation.stream_text(prompt, params, rid, logprobs=reply.asked) for rid in rids]
    try:
        async with contextlib.aclosing(merge_streams(streams)) as parts:
            async for index, part in parts:
                completion_tokens[index] = part.completion_tokens
                if part.text or part.logprobs:
                    yield reply.chunk(index, {"content": part.text}, tokens=part.logprobs)
                reason = finish_reason(part.finish_reason)
                if reason is not None:
                    yield reply.chunk(index, {}, reason)
    except Exception as error:  # headers are sent: report in the stream, then end it
        yield event(stream_error(error))
    if include_usage:
        counts = usage(len(prompt.ids), sum(completion_tokens))
        yield event({**reply.head("chat.completion.chunk"), "choices": [], "usage": counts})
    yield DONE
