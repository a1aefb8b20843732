"""Long ``/generate`` streams read on a thread of their own, each with when and how it ended.

:class:`TimedStreams` starts streams through one base URL, each on a connection of its
own (so the kernel hands each to whichever worker on the shared port accepts first),
from an event loop on its own thread, while a synchronous test acts (kills a worker,
watches the control host). :meth:`TimedStreams.finish` waits, bounded, for all of them
and gives each :class:`Ended`: its stream, the exception that ended it (a closed
connection) or None, and ``time.monotonic()`` at its end.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import httpx

from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import SseStream, generate_stream, stream_problems

__all__ = ["Ended", "TimedStreams"]


@dataclass
class Ended:
    """One stream, once it ended."""

    prompt: str
    stream: SseStream
    failure: BaseException | None
    at: float

    def problems(self, predictor: Predictor, tokens: int) -> list[str]:
        """Why it is not the exact predicted text of ``tokens`` tokens (empty: it is)."""
        if self.failure is not None:
            return [f"{self.prompt}: {self.failure!r}"]
        rid = str(self.stream.events[-1]["meta_info"]["id"]) if self.stream.events else "?"
        return stream_problems(self.stream, rid, predictor.text(self.prompt, tokens), tokens)


class TimedStreams:
    """Streams of ``tokens`` tokens through ``base_url``, started by :meth:`add`."""

    def __init__(self, base_url: str, tokens: int, stem: str) -> None:
        self.base_url = base_url
        self.tokens = tokens
        self.stem = stem
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = httpx.AsyncClient(
            base_url=base_url, timeout=60.0, headers={"Connection": "close"}, trust_env=False
        )
        self._running: list[Future[Ended]] = []

    def add(self, count: int) -> None:
        """Start ``count`` more streams (distinct prompts)."""
        for _ in range(count):
            prompt = f"{self.stem} stream {len(self._running)}"
            self._running.append(asyncio.run_coroutine_threadsafe(self._one(prompt), self._loop))

    @property
    def started(self) -> int:
        return len(self._running)

    async def _one(self, prompt: str) -> Ended:
        body = {"text": prompt, "sampling_params": {"max_new_tokens": self.tokens}}
        seen = SseStream()
        try:
            await generate_stream(self._client, body, into=seen)
        except (httpx.HTTPError, OSError) as exc:
            return Ended(prompt, seen, exc, time.monotonic())
        return Ended(prompt, seen, None, time.monotonic())

    def finish(self, timeout_s: float) -> list[Ended]:
        """Every stream once ended (each within ``timeout_s`` of now); the loop stops.
        Call it once."""
        deadline = time.monotonic() + timeout_s
        try:
            return [
                running.result(max(0.0, deadline - time.monotonic())) for running in self._running
            ]
        finally:
            asyncio.run_coroutine_threadsafe(self._client.aclose(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()
