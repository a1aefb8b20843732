"""``/generate`` streams as a client sees them: read one to its end (:func:`generate_stream`,
or :class:`StreamThread` for a test that acts while it arrives) and say what is wrong
with it (:func:`stream_problems`); :func:`stream_outcomes` runs concurrent streams and
says of each whether it read the engine's exact text."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.integration.harness.predictor import Predictor

__all__ = [
    "SseStream",
    "StreamThread",
    "generate_stream",
    "stream_outcomes",
    "stream_problems",
    "unclear_ending",
]


@dataclass
class SseStream:
    """One ``/generate`` stream as a client saw it, filled in while it arrives."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: The JSON payload of every ``data:`` event before ``[DONE]``, in order.
    events: list[dict[str, Any]] = field(default_factory=list)
    #: ``time.monotonic()`` when each event arrived.
    arrivals: list[float] = field(default_factory=list)
    done: bool = False
    #: Lines that are not ``data: <json>`` events, and events after ``[DONE]``.
    malformed: list[str] = field(default_factory=list)
    #: The JSON body of a refused request.
    error: Any = None

    @property
    def completion_tokens(self) -> int:
        return int(self.events[-1]["meta_info"]["completion_tokens"]) if self.events else 0

    @property
    def text(self) -> str:
        return str(self.events[-1]["text"]) if self.events else ""

    def quiet_for(self) -> float:
        """Seconds since the last event (0 before the first)."""
        return time.monotonic() - self.arrivals[-1] if self.arrivals else 0.0


async def generate_stream(
    client: httpx.AsyncClient, body: dict[str, Any], into: SseStream | None = None
) -> SseStream:
    """POST ``body`` to ``/generate`` with ``stream: true`` and read the stream to its end."""
    seen = into if into is not None else SseStream()
    async with client.stream("POST", "/generate", json={**body, "stream": True}) as response:
        seen.status = response.status_code
        seen.headers = dict(response.headers)
        if response.status_code != 200:
            seen.error = json.loads(await response.aread())
            return seen
        async for line in response.aiter_lines():
            if not line:
                continue
            if not line.startswith("data: ") or seen.done:
                seen.malformed.append(line)
            elif line == "data: [DONE]":
                seen.done = True
            else:
                seen.events.append(json.loads(line.removeprefix("data: ")))
                seen.arrivals.append(time.monotonic())
    return seen


class StreamThread:
    """One :func:`generate_stream` read on a thread of its own, so that a synchronous test
    (a browser's, an operator's) can act while it arrives: :attr:`seen` fills in as
    events come, :meth:`finish` waits (bounded) for its end and re-raises a failure."""

    def __init__(
        self,
        base_url: str,
        body: dict[str, Any],
        *,
        timeout_s: float = 60.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url
        self.body = body
        #: Sent with the request (a ``traceparent``, say).
        self.headers = headers or {}
        self.timeout_s = timeout_s
        self.seen = SseStream()
        #: What ended the read other than its end (reported by :meth:`finish`).
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="generate-stream", daemon=True)

    def start(self) -> StreamThread:
        self._thread.start()
        return self

    def _read(self) -> None:
        async def read() -> None:
            async with httpx.AsyncClient(
                base_url=self.base_url,
                timeout=self.timeout_s,
                headers=self.headers,
                trust_env=False,
            ) as client:
                await generate_stream(client, self.body, into=self.seen)

        try:
            asyncio.run(read())
        except BaseException as exc:  # reported by the test's thread
            self.failure = exc

    def started(self) -> bool:
        """Whether the first event came, or the read failed (for a bounded wait)."""
        return bool(self.seen.events) or self.failure is not None or self.seen.error is not None

    def finish(self, timeout: float) -> SseStream:
        """The stream, once it ended within ``timeout`` without failing."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the stream did not end within {timeout} s"
        if self.failure is not None:
            raise AssertionError(f"the stream failed: {self.failure!r}") from self.failure
        return self.seen


def stream_problems(
    seen: SseStream, rid: str, text: str, tokens: int, finish: dict[str, Any] | None = None
) -> list[str]:
    """What is wrong with a ``/generate`` stream that should have read ``text`` (cumulative
    SGLang events, all for ``rid``), ``tokens`` tokens and ``finish`` (length by default),
    ending ``data: [DONE]``; empty when nothing is."""
    finish = finish if finish is not None else {"type": "length", "length": tokens}
    if seen.status != 200:
        return [f"{rid}: status {seen.status}: {seen.error}"]
    problems = [f"{rid}: malformed line {line!r}" for line in seen.malformed]
    if not seen.done:
        problems.append(f"{rid}: no [DONE]")
    if not seen.events or any("meta_info" not in event for event in seen.events):
        return [*problems, f"{rid}: events without meta_info: {seen.events[-3:]}"]
    ids = {event["meta_info"]["id"] for event in seen.events}
    if ids != {rid}:
        problems.append(f"{rid}: events of other requests {ids - {rid}}")
    texts = [event["text"] for event in seen.events]
    if any(not later.startswith(earlier) for earlier, later in itertools.pairwise(texts)):
        problems.append(f"{rid}: text is not cumulative: {texts}")
    reasons = [event["meta_info"]["finish_reason"] for event in seen.events]
    if reasons[-1] != finish or any(reason is not None for reason in reasons[:-1]):
        problems.append(f"{rid}: finish reasons {reasons}, want one {finish} at the end")
    if seen.text != text:
        problems.append(f"{rid}: text {seen.text!r}, predicted {text!r}")
    if finish["type"] == "length" and seen.completion_tokens != tokens:
        problems.append(f"{rid}: completion_tokens {seen.completion_tokens}, want {tokens}")
    return problems


async def stream_outcomes(
    base_url: str, predictor: Predictor, count: int, length: int, stem: str
) -> list[Any]:
    """``count`` concurrent streams of ``length`` tokens through ``base_url``: for each,
    "exact" when it read the predicted text, else its last event (an error event, a
    wrong finish) or, for a refused request, the refusal's body."""
    prompts = predictor.distinct_prompts(count, [length] * count, stem)
    body = {"sampling_params": {"max_new_tokens": length}}
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0, trust_env=False) as client:
        seen = await asyncio.gather(
            *(generate_stream(client, {**body, "text": prompt}) for prompt in prompts)
        )
    outcomes: list[Any] = []
    for prompt, stream in zip(prompts, seen, strict=True):
        last = stream.events[-1] if stream.events else {}
        rid = str(last.get("meta_info", {}).get("id", "?"))
        exact = not stream_problems(stream, rid, predictor.text(prompt, length), length)
        outcomes.append("exact" if exact else last if stream.status == 200 else stream.error)
    return outcomes


def unclear_ending(stream: SseStream, rid: str, text: str) -> str | None:
    """What is wrong with how a stream that a stop interrupted ended, or None when it
    ended clearly: with ``text`` (finish reason length), with a prefix of it and finish
    reason abort, or with an error event; never cut, never a wrong text."""
    if stream.status != 200:
        return f"{rid}: status {stream.status} {stream.error}"
    if not stream.done:
        return f"{rid}: no [DONE] (cut)"
    last = stream.events[-1] if stream.events else {}
    if "error" in last:
        return None
    reason = (last.get("meta_info") or {}).get("finish_reason") or {}
    if reason.get("type") == "length":
        return None if stream.text == text else f"{rid}: wrong text {stream.text[-40:]!r}"
    if reason.get("type") == "abort":
        return None if text.startswith(stream.text) else f"{rid}: aborted on a wrong text"
    return f"{rid}: ended {reason}"
