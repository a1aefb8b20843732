"""Between HTTP and the link: prompts in, text chunks and embeddings out.

:class:`Generation` turns validated prompts into ``GenerateRequest``/``EmbeddingRequest``
messages, waits for admission (paused: wait; stopping: refused), sends them, and turns
each request's output rows into :class:`TextChunk` s or an :class:`EmbeddingResult`.
Leaving a stream early (the client went away) aborts the request in the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from httpkit.spans import server_traceparent
from router_core.wire import Kind
from router_core.wire.finish import length_reason
from router_core.wire.outputs import BatchEmbeddingOutput
from router_core.wire.requests import EmbeddingRequest, GenerateRequest, SamplingParams
from router_core.worker_link import RequestLost, WorkerLink, finish_reason_of
from switchboard.text import TextCodec
from switchboard.worker.logprobs import LOGPROBS_FEATURE, TokenLogprob
from switchboard.worker.metrics import NO_METRICS, Metrics
from switchboard.worker.results import (
    EmbeddingResult,
    TextChunk,
    TextResult,
    chunk_of,
    first,
)
from switchboard.worker.settings import WorkerSettings

__all__ = [
    "ContextTooLong",
    "EmbeddingResult",
    "Generation",
    "Prompt",
    "PromptError",
    "RequestAborted",
    "TextChunk",
    "TextResult",
]


#: Inputs at least this long (characters, or ids) are tokenized off the event loop.
LARGE_INPUT_CHARS = 32_768


class PromptError(ValueError):
    """A request the worker refuses before sending it (answered with 400); ``param``
    names the field at fault, in the client's terms, when one is."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ContextTooLong(PromptError):
    """A prompt (plus the tokens asked for) that does not fit the context; ``param`` is the
    field holding the prompt."""


class RequestAborted(Exception):
    """The engine aborted a request whose answer cannot be partial (answered with 503)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One tokenized prompt; ``text`` is None when the client sent token ids."""

    ids: list[int]
    text: str | None = None


def _raise_if_lost(reason: dict[str, Any] | None) -> None:
    """A request lost to a fault is an error (503 naming the cause), never a success."""
    lost = None if reason is None else RequestLost.from_reason(reason)
    if lost is not None:
        raise lost


class Generation:
    """The worker's requests to the engine, over one :class:`WorkerLink`.

    Each request carries the HTTP request's server span as its ``traceparent`` (when one
    is sampled), and each generation's tokens and timing go to ``metrics``.
    """

    def __init__(
        self,
        link: WorkerLink,
        tokenizer: TextCodec,
        settings: WorkerSettings,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self.link = link
        self.tokenizer = tokenizer
        self.settings = settings
        self.metrics = metrics
        self._max_token_chars = tokenizer.max_token_chars

    # ------------------------------------------------------------------ prompts

    def prompts(self, source: str | list[str] | list[int] | list[list[int]]) -> list[Prompt]:
        """The prompts in ``source``: a text, texts, token ids or lists of token ids.

        User text is encoded with special-token parsing off, so markup such as
        ``<|endoftext|>`` in a prompt is text, never a control token. Raises
        :class:`PromptError` for an empty batch, an empty prompt or an unknown token id.
        """
        if isinstance(source, str):
            return [self._text_prompt(source)]
        if not source:
            raise PromptError("the prompt list is empty")
        if all(isinstance(item, int) for item in source):
            return [self._id_prompt(source)]  # type: ignore[arg-type]
        return [
            self._text_prompt(item) if isinstance(item, str) else self._id_prompt(item)  # type: ignore[arg-type]
            for item in source
        ]

    async def read_prompts(
        self, source: str | list[str] | list[int] | list[list[int]]
    ) -> list[Prompt]:
        """:meth:`prompts`, tokenizing large inputs in a thread so the event loop (and with
        it every other stream and the heartbeats) keeps running."""
        size = (
            len(source)
            if isinstance(source, str)
            else sum(len(item) if isinstance(item, str | list) else 1 for item in source)
        )
        if size < LARGE_INPUT_CHARS:
            return self.prompts(source)
        return await asyncio.to_thread(self.prompts, source)

    def _text_prompt(self, text: str) -> Prompt:
        limit = self.settings.context_length * self._max_token_chars
        if len(text) > limit:
            # Refused before tokenizing: no tokenization of it could fit the context.
            raise PromptError(
                f"the prompt ({len(text)} characters) cannot fit the context length of "
                f"{self.settings.context_length} tokens"
            )
        ids = self.tokenizer.encode(text, parse_special=False)
        if not ids:
            raise PromptError("the prompt is empty")
        return Prompt(ids=ids, text=text)

    def _id_prompt(self, ids: list[int]) -> Prompt:
        if not ids:
            raise PromptError("the prompt is empty")
        vocab = self.tokenizer.vocab_size
        bad = next((token for token in ids if not 0 <= token < vocab), None)
        if bad is not None:
            raise PromptError(f"token id {bad} is outside the vocabulary (0..{vocab - 1})")
        return Prompt(ids=list(ids))

    def context_length(self) -> int:
        """The most tokens one request may hold: this worker's ``context_length``, or the
        engine's, from its latest load snapshot, when that is smaller."""
        load = self.link.load
        engine = load.context_length if load is not None else 0
        limit = self.settings.context_length
        return min(limit, engine) if engine > 0 else limit

    def check_length(
        self, prompt: Prompt, max_new_tokens: int, *, param: str | None = None
    ) -> None:
        """Refuse (:class:`ContextTooLong`, naming ``param``) a request whose prompt plus
        output exceeds the context length."""
        limit = self.context_length()
        if len(prompt.ids) + max_new_tokens > limit:
            raise ContextTooLong(
                f"the prompt ({len(prompt.ids)} tokens) plus max_new_tokens "
                f"({max_new_tokens}) exceeds the context length of {limit} tokens",
                param,
            )

    # ------------------------------------------------------------------ requests

    def _check_rid_free(self, rid: str) -> None:
        # Checked right before the stream opens, with no await in between: two requests
        # that chose the same rid while both waited for admission cannot both pass.
        if self.link.has_stream(rid):
            raise PromptError(f"a request with rid {rid!r} is already in flight")

    @staticmethod
    def new_rid() -> str:
        """A fresh request id."""
        return uuid.uuid4().hex

    def token_text(self, token_id: int) -> str:
        """One token's own text, special tokens shown (for logprobs)."""
        return self.tokenizer.token_piece(token_id)

    def check_logprobs(self, param: str) -> None:
        """Refuse (400 naming ``param``) logprobs from an engine that does not send them
        (its load snapshot does not list the ``logprobs`` feature)."""
        load = self.link.load
        if load is None or LOGPROBS_FEATURE not in load.features:
            raise PromptError(
                f"{param}: this stack's engine does not produce logprobs (it does not list "
                "the logprobs feature; the llama.cpp engine does)",
                param,
            )

    async def stream_text(
        self, prompt: Prompt, params: SamplingParams, rid: str, *, logprobs: int | None = None
    ) -> AsyncGenerator[TextChunk, None]:
        """Generate; yield a chunk per batch of rows that arrived together, the last one
        carrying the finish reason. ``logprobs``: None for none, else the alternatives
        per token (0: the chosen token's alone). Raises ``AdmissionRefused``/
        ``RouterUnavailable`` before the first chunk; leaving early aborts the request.
        ``max_new_tokens`` 0 (SGLang allows it) is admitted, then answered at once with
        no text, finish reason length 0: no engine is asked for nothing."""
        self.check_length(prompt, params.max_new_tokens)
        await self.link.wait_admission()
        self._check_rid_free(rid)
        if params.max_new_tokens == 0:
            self.metrics.generation(len(prompt.ids)).chunk(0, finished=True)
            yield TextChunk("", len(prompt.ids), 0, 0, length_reason(0))
            return
        request = GenerateRequest(
            rid=rid,
            input_ids=prompt.ids,
            sampling_params=params,
            text=prompt.text,
            stream=True,
            return_logprob=logprobs is not None,
            top_logprobs_num=logprobs or 0,
            created_ns=time.time_ns(),
        )
        with self.link.open_stream(rid) as stream:
            await self.link.send_request(Kind.GENERATE, request, traceparent=server_traceparent())
            timer = self.metrics.generation(len(prompt.ids))
            while True:
                head = await stream.next_row()
                rows = [head, *stream.take_ready()]
                chunk = chunk_of(rows)
                timer.chunk(chunk.completion_tokens, finished=chunk.finish_reason is not None)
                _raise_if_lost(chunk.finish_reason)
                yield chunk
                if chunk.finish_reason is not None:
                    return

    async def generate_text(
        self, prompt: Prompt, params: SamplingParams, rid: str, *, logprobs: int | None = None
    ) -> TextResult:
        """Generate to the end and return the whole text (and logprobs, as
        :meth:`stream_text`)."""
        started = time.monotonic()
        parts: list[str] = []
        tokens: list[TokenLogprob] = []
        last: TextChunk | None = None
        stream = self.stream_text(prompt, params, rid, logprobs=logprobs)
        async with contextlib.aclosing(stream) as chunks:
            async for chunk in chunks:
                parts.append(chunk.text)
                tokens += chunk.logprobs
                last = chunk
        assert last is not None  # the stream ends only after a finishing chunk
        return TextResult(
            rid=rid,
            text="".join(parts),
            prompt_tokens=last.prompt_tokens,
            completion_tokens=last.completion_tokens,
            cached_tokens=last.cached_tokens,
            finish_reason=last.finish_reason,
            latency_s=time.monotonic() - started,
            logprobs=tokens,
            weight_version=last.weight_version,
        )

    async def embed(self, prompt: Prompt, rid: str) -> EmbeddingResult:
        """Embed ``prompt`` through the engine's embedding path."""
        self.check_length(prompt, 0)
        await self.link.wait_admission()
        self._check_rid_free(rid)
        request = EmbeddingRequest(
            rid=rid, input_ids=prompt.ids, text=prompt.text, created_ns=time.time_ns()
        )
        with self.link.open_stream(rid) as stream:
            await self.link.send_request(Kind.EMBED, request, traceparent=server_traceparent())
            while True:
                row = await stream.next_row()
                reason = finish_reason_of(row)
                if reason is None:
                    continue
                _raise_if_lost(reason)
                embedding = (
                    first(row.embeddings, None) if isinstance(row, BatchEmbeddingOutput) else None
                )
                return EmbeddingResult(
                    rid=rid,
                    embedding=list(embedding or []),
                    prompt_tokens=first(row.prompt_tokens, len(prompt.ids)),
                    finish_reason=reason,
                )
