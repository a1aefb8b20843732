"""The closed-loop load of the end-to-end benchmark.

``concurrency`` clients each send one streaming request, wait for its end, and send the
next, for a warm-up and then a measured window. At each edge of the window a probe is
called (the stack's CPU sample) and the load generator's own CPU time is read, so both
cover exactly the same interval. In-flight requests are cancelled when the window closes:
they are neither counted nor errors.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from switchboard.bench.e2e_client import ClientKind, StreamClient, generate_body, open_clients
from switchboard.bench.e2e_stats import RequestRecord

__all__ = ["LoadPlan", "LoadResult", "event_loop_name", "run_load"]

T = TypeVar("T")

#: How often the load checks whether it was interrupted.
_CHECK_S: Final = 0.1

#: Pause after a failed request, so a stack that refuses connections is not hammered
#: by a client spinning on the CPU the measurement needs.
_ERROR_PAUSE_S: Final = 0.05


@dataclass(frozen=True)
class LoadPlan:
    """The shape of the load: clients, timing, and the request each client repeats."""

    concurrency: int
    warmup_s: float
    measure_s: float
    max_new_tokens: int
    prompt: str
    client: ClientKind = "raw"
    request_timeout_s: float = 60.0


@dataclass(frozen=True)
class LoadResult(Generic[T]):
    """Every request of a run (warm-up included), the window, and what was probed at its edges."""

    records: list[RequestRecord]
    window_start: float
    window_end: float
    #: The load generator's CPU seconds (user + system, every thread) inside the window.
    loadgen_cpu_s: float
    probe_start: T
    probe_end: T


async def _user(client: StreamClient, records: list[RequestRecord]) -> None:
    while True:
        record = await client.generate()
        records.append(record)
        if record.error is not None:
            await asyncio.sleep(_ERROR_PAUSE_S)


class _Interrupted(Exception):
    """Raised inside the loop when the run is interrupted (turned into KeyboardInterrupt
    once the loop has closed every connection)."""


async def _sleep(seconds: float, interrupted: Callable[[], bool]) -> None:
    deadline = time.perf_counter() + seconds
    while (left := deadline - time.perf_counter()) > 0:
        if interrupted():
            raise _Interrupted
        await asyncio.sleep(min(_CHECK_S, left))


async def _closed_loop(
    host: str,
    port: int,
    plan: LoadPlan,
    probe: Callable[[], T],
    interrupted: Callable[[], bool],
) -> LoadResult[T]:
    records: list[RequestRecord] = []
    body = generate_body(plan.prompt, plan.max_new_tokens)
    async with open_clients(
        plan.client,
        host=host,
        port=port,
        body=body,
        count=plan.concurrency,
        timeout_s=plan.request_timeout_s,
    ) as clients:
        users = [asyncio.create_task(_user(client, records)) for client in clients]
        try:
            await _sleep(plan.warmup_s, interrupted)
            probe_start = probe()
            window_start = time.perf_counter()
            cpu_start = time.process_time()
            await _sleep(plan.measure_s, interrupted)
            window_end = time.perf_counter()
            cpu_end = time.process_time()
            probe_end = probe()
        finally:
            for task in users:
                task.cancel()
            await asyncio.gather(*users, return_exceptions=True)
    return LoadResult(
        records=records,
        window_start=window_start,
        window_end=window_end,
        loadgen_cpu_s=cpu_end - cpu_start,
        probe_start=probe_start,
        probe_end=probe_end,
    )


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # not installed (Windows): the default loop
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def event_loop_name() -> str:
    """Which event loop :func:`run_load` drives the clients with."""
    try:
        return f"uvloop {importlib.metadata.version('uvloop')}"
    except importlib.metadata.PackageNotFoundError:
        return "asyncio"


def run_load(
    host: str,
    port: int,
    plan: LoadPlan,
    probe: Callable[[], T],
    interrupted: Callable[[], bool] = lambda: False,
) -> LoadResult[T]:
    """Drive the closed loop against ``http://host:port/generate``; blocks until done.

    ``probe`` is called at the start and the end of the measured window (in the event
    loop's thread, so keep it to a few milliseconds). ``interrupted`` is polled every
    0.1 s; when it turns true the clients are stopped, their connections closed, and
    KeyboardInterrupt raised.
    """
    try:
        return _run(_closed_loop(host, port, plan, probe, interrupted))
    except _Interrupted:
        raise KeyboardInterrupt from None
