"""Detokenizer router and detokenizer restarts mid-stream (issue 11, point 3): every
``/generate`` stream reads exactly its predicted text or ends with a clear error, never a
silently wrong text.

One stack for the module: ``switchboard router``, ``detok-router``, 2 detokenizers sending
text straight to the workers, the built-in engine (slowed to 20 ms a step, so 120
streams of 60..119 tokens are still running when the fault comes) and 2 HTTP workers
whose idle bound is ``IDLE_TIMEOUT_S``. The built-in engine is deterministic: the
reference texts are :class:`Predictor`'s, and the first test proves a run without faults
reads them exactly. Each fault test SIGKILLs one process once half the streams are under
way (mid-stream, or as the first ones end), starts it again on the same sockets, and
sorts the streams: ``ok`` (exact text and length finish), ``error`` (an ``error`` event
or an abort, with a message, the text before it a prefix of the reference), ``wrong``
(anything else that ended) and ``hung`` (still open when nothing more can come: no row
arrived for ``QUIET_S`` and the engine runs nothing). A stream whose last rows died in
the killed process gets nothing more, so only the workers' idle bound ends it
(``worker: idle timeout``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import httpx
import pytest

from tests.integration.harness import ManagedProcess, wait_until
from tests.integration.harness.http_stack import HttpStack
from tests.integration.harness.http_worker import (
    ENOUGH_CONNECTIONS,
    HTTP_TIMEOUT,
    owned_stack,
    predictor,
)
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import SseStream, generate_stream, stream_problems
from tests.integration.harness.stack import DetokRouterHandle
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration

#: The shared fixture this module uses (imported, so listed).
__all__ = ["predictor"]

REQUESTS = 120
#: Seconds a step of the built-in engine takes here.
STEP_TIME_S = "0.02"
#: Streams under way (two events or more, not finished) before the kill.
UNDER_WAY = REQUESTS // 2
#: When the kill comes: streams finished by then (``ending``: the first ones are ending,
#: so some final rows die in the killed process).
FINISHED_BY = {"mid-stream": 0, "ending": 4}
#: The workers' bound on a request with no output (``--idle-timeout-s``).
IDLE_TIMEOUT_S = 10.0
#: With the engine idle, seconds without a row anywhere after which open streams are hung
#: (longer than the idle bound, which ends them first).
QUIET_S = IDLE_TIMEOUT_S + 5.0
#: Seconds the streams get, at most, after the fault.
SETTLE_S = 90.0
#: What an abort's message starts with, by the check that sent it.
ABORT_KINDS = {
    "the detokenizer lost this request's decoding state": "detokenizer: state lost",
    "output rows were lost before the detokenizer": "detokenizer: rows lost",
    "output rows came twice or out of order before the detokenizer": "detokenizer: overlap",
    "output rows were lost between the engine and this worker": "worker: rows lost",
    "output rows came twice or out of order between the engine": "worker: overlap",
    "no output for": "worker: idle timeout",
    "detokenizer-router restarted and no output came": "worker: upstream restart",
    "detokenizer-0 restarted and no output came": "worker: upstream restart",
    "detokenizer-1 restarted and no output came": "worker: upstream restart",
}


def lengths(count: int) -> list[int]:
    """``max_new_tokens`` of request ``i``: 60..119, varied."""
    return [60 + (i * 7) % 60 for i in range(count)]


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """The module's stack, its engine slowed so that streams last a couple of seconds,
    its workers' idle bound short enough for a test."""
    log_dir = tmp_path_factory.mktemp("detokenizer-restart-logs")
    yield from owned_stack(
        request,
        switchboard_bin,
        log_dir,
        engine_args=("--step-time-s", STEP_TIME_S),
        worker_args=("--idle-timeout-s", str(IDLE_TIMEOUT_S)),
    )


@dataclass
class Figures:
    """How a run's streams ended."""

    outcomes: Counter[str] = field(default_factory=Counter)
    aborts: Counter[str] = field(default_factory=Counter)
    #: What is wrong with each ``wrong`` stream.
    problems: list[str] = field(default_factory=list)
    under_way_at_fault: int = 0
    finished_before_fault: int = 0

    def line(self, label: str) -> str:
        counts = ", ".join(f"{k} {self.outcomes[k]}" for k in ("ok", "error", "wrong", "hung"))
        return (
            f"{label}: {counts} of {REQUESTS} (at the kill {self.under_way_at_fault} under way, "
            f"{self.finished_before_fault} finished); aborts: {dict(self.aborts)}"
        )


def abort_kind(message: str) -> str:
    """Which check an abort's message comes from (the message itself if none)."""
    for prefix, kind in ABORT_KINDS.items():
        if message.startswith(prefix):
            return kind
    return message


def judge(seen: SseStream, rid: str, text: str, tokens: int, figures: Figures) -> None:
    """Count one stream that ended as ok, error or wrong."""
    if seen.status != 200:  # refused: an HTTP error the client sees as one
        figures.outcomes["error"] += 1
        figures.aborts[f"HTTP {seen.status}"] += 1
        return
    problems = stream_problems(seen, rid, text, tokens)
    if not problems:
        figures.outcomes["ok"] += 1
        return
    message = failure_message(seen)
    partial = next((e["text"] for e in reversed(seen.events) if "text" in e), "")
    if message and seen.done and not seen.malformed and text.startswith(partial):
        figures.outcomes["error"] += 1
        figures.aborts[abort_kind(message)] += 1
        return
    figures.outcomes["wrong"] += 1
    figures.problems += problems


def failure_message(seen: SseStream) -> str | None:
    """The message of the ``error`` event or abort finish that ended ``seen``, if any."""
    if not seen.events:
        return None
    last = seen.events[-1]
    error = last.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or "") or None
    reason = last.get("meta_info", {}).get("finish_reason")
    if isinstance(reason, dict) and reason.get("type") == "abort":
        return str(reason.get("message") or "") or None
    return None


def under_way(seen: list[SseStream]) -> tuple[int, int]:
    """Streams with two events or more not finished yet, and streams finished."""
    finished = sum(stream.done for stream in seen)
    return sum(len(stream.events) >= 2 and not stream.done for stream in seen), finished


async def run_streams(
    stack: HttpStack,
    predictor: Predictor,
    stem: str,
    fault: Callable[[], Awaitable[None]] | None = None,
    finished_by: int = 0,
) -> Figures:
    """``REQUESTS`` concurrent streams with distinct prompts; ``fault`` runs once
    ``UNDER_WAY`` of them are under way and ``finished_by`` have finished (the streams
    are read meanwhile)."""
    sizes = lengths(REQUESTS)
    prompts = predictor.distinct_prompts(REQUESTS, sizes, stem)
    rids = [f"{stem}-{i}" for i in range(REQUESTS)]
    seen = [SseStream() for _ in rids]
    figures = Figures()
    async with httpx.AsyncClient(
        base_url=stack.base_url, timeout=HTTP_TIMEOUT, limits=ENOUGH_CONNECTIONS
    ) as client:
        tasks = [
            asyncio.ensure_future(
                generate_stream(
                    client,
                    {"text": prompt, "rid": rid, "sampling_params": {"max_new_tokens": size}},
                    into=into,
                )
            )
            for prompt, rid, size, into in zip(prompts, rids, sizes, seen, strict=True)
        ]
        if fault is not None:

            def due() -> bool:
                running, finished = under_way(seen)
                ready = running >= UNDER_WAY and finished >= finished_by
                return ready or all(task.done() for task in tasks)

            await eventually(due, 60.0, "the moment of the fault", 0.01)
            figures.under_way_at_fault, figures.finished_before_fault = under_way(seen)
            await fault()
        await settle(stack, tasks, seen)
    for task, stream, prompt, rid, size in zip(tasks, seen, prompts, rids, sizes, strict=True):
        if task.cancelled():  # still open when nothing more could come
            figures.outcomes["hung"] += 1
        elif (failure := task.exception()) is not None:  # the connection failed: an error too
            figures.outcomes["error"] += 1
            figures.aborts[f"transport: {type(failure).__name__}"] += 1
        else:
            judge(stream, rid, predictor.text(prompt, size), size, figures)
    return figures


async def settle(
    stack: HttpStack, tasks: Sequence[asyncio.Future[SseStream]], seen: list[SseStream]
) -> None:
    """Wait for every stream to end, or until nothing more can come (the engine idle and
    no event for ``QUIET_S``), within ``SETTLE_S``; cancel those still open."""
    started = time.monotonic()
    while time.monotonic() < started + SETTLE_S:
        _, pending = await asyncio.wait(tasks, timeout=0.5)
        if not pending:
            return
        last = max((stream.arrivals[-1] for stream in seen if stream.arrivals), default=started)
        if time.monotonic() - max(last, started) > QUIET_S:
            load = await asyncio.to_thread(stack.ctl, "load")
            if load is not None and load["running"] == 0 and load["waiting"] == 0:
                break
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def respawn(stack: HttpStack, victim: ManagedProcess, name: str) -> ManagedProcess:
    """SIGKILL ``victim`` and start the same command line again on the same sockets.

    Spawned from the event loop's (main) thread: a child's parent-death signal
    (``--parent-pid``) fires when the thread that started it ends.
    """
    victim.kill()
    for path in victim.binds:
        path.unlink(missing_ok=True)  # so that the new process's bind can be seen
    argv = [str(arg) for arg in victim.popen.args]  # type: ignore[union-attr]
    fresh = stack.processes.spawn(name, argv, victim.binds)

    def bound() -> bool:
        fresh.assert_running()
        return all(path.exists() for path in fresh.binds)

    await eventually(bound, 30.0, f"{name} to bind {fresh.binds}")
    return fresh


def wait_idle(stack: HttpStack) -> None:
    """Wait until the engine runs and queues nothing (the previous test's streams ended)."""

    def idle() -> bool:
        load = stack.ctl("load")
        return load is not None and load["running"] == 0 and load["waiting"] == 0

    wait_until(idle, 30.0, "the engine to be idle")


#: Runs of one fault scenario at most. A run whose fault came only after its streams had
#: ended (on a loaded machine all of them can end between two looks) shows nothing about
#: the fault, so it is run again, with new prompts.
ATTEMPTS = 3


def faulted_run(
    stack: HttpStack,
    predictor: Predictor,
    stem: str,
    fault: Callable[[], Awaitable[None]],
    finished_by: int,
) -> Figures:
    """:func:`run_streams` with ``fault``, again (at most :data:`ATTEMPTS` runs) while
    the fault came too late; the last run's figures."""
    for attempt in range(ATTEMPTS):
        wait_idle(stack)
        run = run_streams(stack, predictor, f"{stem}-{attempt}", fault, finished_by)
        figures = asyncio.run(run)
        if figures.under_way_at_fault >= UNDER_WAY:
            break
    return figures


def check(figures: Figures, label: str) -> None:
    print(figures.line(label))
    outcomes = figures.outcomes
    assert sum(outcomes.values()) == REQUESTS, figures
    assert outcomes["wrong"] == 0, f"{figures.line(label)}\n" + "\n".join(figures.problems[:10])
    assert outcomes["hung"] == 0, f"hung past the idle bound: {figures.line(label)}"
    assert figures.under_way_at_fault >= UNDER_WAY, f"the fault came too late: {figures}"


class TestDetokenizerRestart:
    def test_without_a_fault_every_stream_reads_its_reference_text(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """The reference: 120 concurrent streams each read exactly the text the engine's
        token rule predicts (the built-in engine is deterministic), with a length finish."""
        figures = asyncio.run(run_streams(stack, predictor, "calm"))
        print(figures.line("no fault"))
        assert figures.outcomes["ok"] == REQUESTS, "\n".join(figures.problems[:10])

    @pytest.mark.parametrize("moment", list(FINISHED_BY))
    def test_a_detokenizer_router_restart_leaves_no_wrong_text(
        self, stack: HttpStack, predictor: Predictor, moment: str
    ) -> None:
        """SIGKILL the detokenizer router with half the streams under way (mid-stream, or
        as the first ones end) and start it again: every stream reads its exact text or
        ends with an abort saying why."""

        async def restart() -> None:
            old = stack.detok_router
            fresh = await respawn(stack, old.process, f"detok-router-restarted-{moment}")
            stack.detok_router = DetokRouterHandle(fresh, old.endpoints, old.control)
            status = stack.detok_router.ctl("status")
            assert status["pid"] == fresh.pid, status

        stem = f"router-kill-{moment}"
        figures = faulted_run(stack, predictor, stem, restart, FINISHED_BY[moment])
        check(figures, f"detokenizer router SIGKILL, {moment}")

    @pytest.mark.parametrize("moment", list(FINISHED_BY))
    def test_a_detokenizer_restart_leaves_no_wrong_text(
        self, stack: HttpStack, predictor: Predictor, moment: str
    ) -> None:
        """SIGKILL detokenizer 0 with half the streams under way (mid-stream, or as the
        first ones end) and start it again: the requests it was decoding end with an
        abort (its state is gone), never with a wrong text; the others read exactly."""

        async def restart() -> None:
            victim = stack.detokenizers[0]
            name = f"detokenizer-0-restarted-{moment}"
            stack.detokenizers[0] = await respawn(stack, victim, name)

        stem = f"detok-kill-{moment}"
        figures = faulted_run(stack, predictor, stem, restart, FINISHED_BY[moment])
        check(figures, f"detokenizer SIGKILL, {moment}")
        hit = figures.outcomes["error"] + figures.outcomes["hung"]
        assert hit > 0, f"no stream was on the killed detokenizer: {figures.line('')}"
