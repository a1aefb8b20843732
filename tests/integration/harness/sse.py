"""``/generate`` streams as a client sees them: read one to its end (:func:`generate_stream`)
and say what is wrong with it (:func:`stream_problems`)."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["SseStream", "generate_stream", "stream_problems"]


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
