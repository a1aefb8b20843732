"""Streaming load from many clients, each request on a new connection, checked exactly.

:class:`SteadyLoad` runs ``clients`` loops on an event loop of its own thread. Each loop
sends a streaming ``POST /generate`` of a distinct prompt over a fresh connection (so
the kernel hands every request to whichever worker accepts next), reads the whole
stream, compares its text with the prediction and starts the next. What an operator
does meanwhile (drain, restart) must leave :attr:`LoadTally.errors` empty.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import httpx

from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import generate_stream, stream_problems

__all__ = ["LoadTally", "SteadyLoad"]

#: A fresh connection per request.
_FRESH = {"Connection": "close"}


@dataclass
class LoadTally:
    """What the load saw: requests finished exactly, and every other outcome, described."""

    exact: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return self.exact + len(self.errors)


class SteadyLoad:
    """``clients`` concurrent loops of ``tokens``-token streams against ``base_url``.

    Use as a context manager: the load runs from entry until exit, then every request in
    flight finishes (bounded by ``timeout_s`` each) and :attr:`tally` is final.
    """

    def __init__(
        self, base_url: str, predictor: Predictor, *, clients: int, tokens: int, stem: str
    ) -> None:
        self.base_url = base_url
        self.predictor = predictor
        self.clients = clients
        self.tokens = tokens
        self.stem = stem
        self.timeout_s = 60.0
        self.tally = LoadTally()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-load", daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> SteadyLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout_s + 10)
        assert not self._thread.is_alive(), "the load did not finish its requests in time"

    def snapshot(self) -> LoadTally:
        """A copy of the tally so far."""
        with self._lock:
            return LoadTally(self.tally.exact, list(self.tally.errors))

    def _run(self) -> None:
        asyncio.run(self._all())

    async def _all(self) -> None:
        limits = httpx.Limits(max_connections=self.clients * 2)
        async with httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self.timeout_s,
            limits=limits,
            headers=_FRESH,
            trust_env=False,
        ) as client:
            await asyncio.gather(*(self._loop(client, n) for n in range(self.clients)))

    async def _loop(self, client: httpx.AsyncClient, n: int) -> None:
        i = 0
        while not self._stop.is_set():
            rid = f"{self.stem}-{n}-{i}"
            i += 1
            problem = await self._one(client, rid)
            with self._lock:
                if problem is None:
                    self.tally.exact += 1
                else:
                    self.tally.errors.append(problem)

    async def _one(self, client: httpx.AsyncClient, rid: str) -> str | None:
        """None when the stream read exactly the predicted text, else what went wrong."""
        prompt = f"{self.stem} request {rid}"
        body = {"text": prompt, "rid": rid, "sampling_params": {"max_new_tokens": self.tokens}}
        try:
            stream = await generate_stream(client, body)
        except (httpx.HTTPError, OSError) as exc:
            return f"{rid}: {type(exc).__name__}: {exc!r}"
        problems = stream_problems(
            stream, rid, self.predictor.text(prompt, self.tokens), self.tokens
        )
        return problems[0] if problems else None
