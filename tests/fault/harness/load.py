"""Load: streaming clients against a stack's workers, every request recorded and classified.

:class:`Load` sends the requests of a :class:`RequestPlan` over httpx (one connection
per request, so the kernel spreads them over the workers as it does for separate
clients) and reads each stream to its end, bounded by ``bound_s``: a request with no
end by then is ``hung``. Two shapes, started with :meth:`Load.closed` (``concurrency``
clients, each sending its next request when the last ended; after a failure a client
waits ``error_pause_s`` before the next, as a client that backs off would) or
:meth:`Load.open` (``rate`` requests per second whatever the answers, at most
``max_in_flight`` at once). :meth:`Load.stop` stops sending and waits for what is in
flight. With a :class:`ConnectionCensus`, each request records the worker that accepted
its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.classify import Observed, Outcome, Verdict, classify
from tests.fault.harness.expected import RequestPlan, RequestSpec

__all__ = ["REQUEST_BOUND_S", "Load", "RequestRecord"]

#: A request with no end this long after it started is hung. Far above any request's
#: time in a healthy stack (well under 2 s), every restart the supervisor does and the
#: idle bound the fault stacks run with (``StackConfig.idle_timeout_s``).
REQUEST_BOUND_S = 30.0
_PATHS = {"generate": "/generate", "completions": "/v1/completions"}


@dataclass
class RequestRecord:
    """One request as sent and as its client saw it."""

    number: int
    rid: str
    spec: RequestSpec
    started: float
    seen: Observed = field(default_factory=Observed)
    #: When the response's status line arrived (a worker had taken the request).
    responded: float | None = None
    ended: float | None = None
    #: The worker role (``worker-w0``) that accepted the connection, if known.
    worker: str | None = None
    verdict: Verdict | None = None

    @property
    def outcome(self) -> Outcome:
        assert self.verdict is not None, f"{self.rid} has not ended"
        return self.verdict.outcome

    def in_flight_at(self, moment: float) -> bool:
        return self.started <= moment and (self.ended is None or self.ended > moment)

    def describe(self) -> str:
        """One line for a report: which request, where, what became of it."""
        verdict = self.verdict or Verdict(Outcome.HUNG, "still running")
        took = "-" if self.ended is None else f"{self.ended - self.started:.2f}s"
        return (
            f"{self.rid} {self.spec.endpoint} max_tokens={self.spec.max_tokens} "
            f"worker={self.worker or '?'} took {took}: {verdict.outcome.value}: {verdict.cause}"
        )


def _error_message(body: bytes) -> str:
    try:
        decoded = json.loads(body)
    except ValueError:
        return body[:200].decode(errors="replace") or "no body"
    error = decoded.get("error", decoded) if isinstance(decoded, dict) else decoded
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _read_event(spec: RequestSpec, seen: Observed, payload: dict[str, Any]) -> None:
    if "error" in payload:
        error = payload["error"]
        seen.error = str(error.get("message") if isinstance(error, dict) else error)
        return
    seen.events += 1
    if spec.endpoint == "generate":
        seen.text = str(payload["text"])
        meta = payload.get("meta_info", {})
        seen.finish = meta.get("finish_reason")
        seen.completion_tokens = meta.get("completion_tokens")
        return
    for choice in payload.get("choices", []):
        seen.text += str(choice.get("text", ""))
        if choice.get("finish_reason") is not None:
            seen.finish = choice["finish_reason"]


class Load:
    """Streaming load on one stack (see the module docstring); an async context manager
    whose exit stops it."""

    def __init__(
        self,
        base_url: str,
        plan: RequestPlan,
        *,
        label: str,
        model: str = "switchboard-sim",
        bound_s: float = REQUEST_BOUND_S,
        census: ConnectionCensus | None = None,
        error_pause_s: float = 0.05,
    ) -> None:
        self.base_url = base_url
        self.plan = plan
        self.label = label
        self.model = model
        self.bound_s = bound_s
        self.census = census
        self.error_pause_s = error_pause_s
        self.records: list[RequestRecord] = []
        self._numbers = itertools.count()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight: set[asyncio.Task[RequestRecord]] = set()
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Load:
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(self.bound_s + 10.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
            trust_env=False,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
        assert self._client is not None
        await self._client.aclose()

    # ------------------------------------------------------------------ shapes

    def closed(self, concurrency: int) -> None:
        """Start ``concurrency`` clients, each sending its next request when one ends."""
        self._tasks += [asyncio.create_task(self._client_loop()) for _ in range(concurrency)]

    def open(self, rate: float, max_in_flight: int = 1000) -> None:
        """Start sending ``rate`` requests per second, at most ``max_in_flight`` at once."""
        self._tasks.append(asyncio.create_task(self._pacer(rate, max_in_flight)))

    async def stop(self) -> None:
        """Stop sending; wait for every request in flight (each ends within its bound)."""
        self._stopping.set()
        await asyncio.gather(*self._tasks)
        await asyncio.gather(*self._in_flight)
        self._tasks.clear()

    # ------------------------------------------------------------------ reading

    @property
    def issued(self) -> int:
        return len(self.records)

    def ended(self) -> list[RequestRecord]:
        return [record for record in self.records if record.ended is not None]

    def count(self, outcome: Outcome, where: Callable[[RequestRecord], bool] | None = None) -> int:
        """Ended requests with ``outcome`` (among those ``where`` accepts)."""
        return sum(1 for r in self.ended() if r.outcome is outcome and (where is None or where(r)))

    async def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait (bounded) until ``condition()``; the time it held, ``time.monotonic()``."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:.0f} s waiting for {what}; "
                    f"{self.issued} issued, {len(self.ended())} ended"
                )
            await asyncio.sleep(0.02)
        return time.monotonic()

    # ------------------------------------------------------------------ sending

    async def _client_loop(self) -> None:
        while not self._stopping.is_set():
            record = await self.request()
            if record.outcome is not Outcome.OK:
                await asyncio.sleep(self.error_pause_s)

    async def _pacer(self, rate: float, max_in_flight: int) -> None:
        period = 1.0 / rate
        next_at = time.monotonic()
        while not self._stopping.is_set():
            if len(self._in_flight) < max_in_flight:
                task = asyncio.create_task(self.request())
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)

    async def request(self, number: int | None = None) -> RequestRecord:
        """Send one request of the plan (the next one unless ``number``), read it to its end."""
        chosen = next(self._numbers) if number is None else number
        spec = self.plan.spec(chosen)
        record = RequestRecord(chosen, f"{self.label}-{chosen}", spec, time.monotonic())
        self.records.append(record)
        seen = record.seen
        assert self._client is not None
        try:
            async with asyncio.timeout(self.bound_s):
                await self._stream(record)
        except TimeoutError:
            seen.timed_out = True
        except httpx.HTTPError as exc:
            seen.broken = f"{type(exc).__name__}: {exc or exc.__cause__ or exc.__context__!r}"
        finally:
            record.ended = time.monotonic()
            record.verdict = classify(seen, spec.text, spec.max_tokens)
        return record

    async def _stream(self, record: RequestRecord) -> None:
        spec, seen = record.spec, record.seen
        assert self._client is not None
        body = spec.body(record.rid, self.model)
        async with self._client.stream("POST", _PATHS[spec.endpoint], json=body) as response:
            seen.status = response.status_code
            record.responded = time.monotonic()
            self._attribute(record, response)
            if response.status_code != 200:
                seen.error = _error_message(await response.aread())
                return
            async for line in response.aiter_lines():
                if not line:
                    continue
                if line == "data: [DONE]":
                    seen.done = True
                elif not line.startswith("data: ") or seen.done:
                    seen.malformed.append(line[:120])
                else:
                    try:
                        _read_event(spec, seen, json.loads(line.removeprefix("data: ")))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        seen.malformed.append(line[:120])  # not an event of this API

    def _attribute(self, record: RequestRecord, response: httpx.Response) -> None:
        if self.census is None:
            return
        stream = response.extensions.get("network_stream")
        address = stream.get_extra_info("client_addr") if stream is not None else None
        if address:
            record.worker = self.census.owner(int(address[1]))
