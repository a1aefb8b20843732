"""A pause/continue storm while a worker and then the tokenizer router are killed.

Ten admin API clients send 1,000 operations between them as fast as they are answered
(``POST /api/pause`` in a random mode, ``POST /api/continue``, each with a random
``timeout_s``). When 300 have started, worker ``w1`` is SIGKILLed; operations from 650
on wait until it is back, and when 660 have started the tokenizer router is SIGKILLed,
so both kills hit a storm in full flow and its restarts happen under it (later gates
only make sure each kill comes before the storm runs out). What must hold:

* no caller waits past its timeout: every call is answered (200, a barrier's 504, or a
  503 naming the router as unavailable) within its ``timeout_s`` plus :data:`SLACK_S`;
* afterwards the pause state is the same everywhere: the router (``/api/status``),
  every worker (its own ``/get_server_info``) and the engine (which steps only when
  not paused: ``harness/engine_probe.py``), within ``pause_agreement.SETTLE_S``;
* a continue then completes and a request comes back exact.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load
from tests.fault.harness.modes import scaled
from tests.fault.harness.operator_storm import (
    CLIENT_WAIT_S,
    Call,
    Storm,
    overdue,
    storm_client,
)
from tests.fault.harness.pause_agreement import settle
from tests.fault.harness.recovery import wait_restarted
from tests.fault.harness.stack import FaultStack, fault_stack

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(600)]

OPERATIONS = scaled(1000, 10_000)
CLIENTS = 10
KILL_WORKER_AT = OPERATIONS * 30 // 100
#: Operations from here on wait for the worker to be back.
WORKER_BACK_GATE = OPERATIONS * 65 // 100
KILL_ROUTER_AT = WORKER_BACK_GATE + CLIENTS
#: Safety gates: a kill always comes before the storm ends.
WORKER_KILLED_GATE = KILL_WORKER_AT + 50
ROUTER_KILLED_GATE = OPERATIONS * 95 // 100
#: What an answer may take beyond the timeout it was asked for.
SLACK_S = 2.0


class GatedStorm(Storm):
    """The storm, gated on its two faults: calls wait for ``w1``'s kill, then for it to
    be back, then for the router's kill."""

    def __init__(self) -> None:
        self.worker_killed = asyncio.Event()
        self.worker_back = asyncio.Event()
        self.router_killed = asyncio.Event()
        super().__init__(
            [
                (WORKER_KILLED_GATE, self.worker_killed),
                (WORKER_BACK_GATE, self.worker_back),
                (ROUTER_KILLED_GATE, self.router_killed),
            ]
        )


async def admin_client(stack: FaultStack, storm: Storm, rng: random.Random, count: int) -> None:
    async with stack.async_admin() as admin:
        await storm_client(admin, storm, rng, count, paths=("/api/pause", "/api/continue"))


async def kill_when(
    stack: FaultStack,
    storm: GatedStorm,
    role: str,
    at: int,
    killed: asyncio.Event,
    figures: Figures,
) -> None:
    """SIGKILL ``role`` once ``at`` operations have started; wait until it is back."""
    try:
        while storm.started < at:
            await asyncio.sleep(0.001)
        old = stack.pid(role)
        killed_at = time.monotonic()
        os.kill(old, signal.SIGKILL)
        figures.set(f"{role}_killed_at_operation", storm.started)
    finally:
        killed.set()
    async with stack.async_admin() as admin:
        _new, ready_at = await wait_restarted(stack, admin, role, old, 60.0)
    figures.set(f"{role}_restart_s", ready_at - killed_at)


async def faults(stack: FaultStack, storm: GatedStorm, figures: Figures) -> None:
    try:
        await kill_when(stack, storm, "worker-w1", KILL_WORKER_AT, storm.worker_killed, figures)
    finally:
        storm.worker_back.set()
    await kill_when(stack, storm, "router", KILL_ROUTER_AT, storm.router_killed, figures)


async def storm_and_settle(stack: FaultStack, figures: Figures) -> bool:
    storm = GatedStorm()
    rng = random.Random(20261201)
    started = time.monotonic()
    share = OPERATIONS // CLIENTS
    clients = [
        admin_client(stack, storm, random.Random(rng.random()), share) for _ in range(CLIENTS)
    ]
    fault_task = asyncio.create_task(faults(stack, storm, figures))
    await asyncio.gather(*clients)
    figures.set("storm_s", time.monotonic() - started)
    try:
        await fault_task
    except AssertionError as exc:
        figures.note(f"fault: {exc}")
    calls = storm.calls
    statuses = Counter(call.status for call in calls)
    late = overdue(calls, SLACK_S)
    figures.set("operations", len(calls))
    figures.set("statuses", {str(k): v for k, v in sorted(statuses.items(), key=str)})
    figures.set("errors", dict(Counter(call.error for call in calls if call.error)))
    figures.set("max_over_timeout_s", max(c.latency_s - c.timeout_s for c in calls))
    figures.set("overdue", len(late))
    for call in late[:10]:
        figures.note(f"overdue: {call}")
    return await settle(stack, figures)


async def continue_and_serve(stack: FaultStack, figures: Figures) -> None:
    async with stack.async_admin() as admin:
        response = await admin.post("/api/continue", json={"timeout_s": 5})
    figures.set("final_continue", response.status_code)
    plan = RequestPlan.build("storm-after", size=8)
    async with Load(stack.base_url, plan, label="storm-after") as load:
        record = await load.request()
    figures.set("request_after", record.outcome.value)
    figures.failures([record])


class TestPauseStorm:
    def test_one_state_everywhere(self, tmp_path: Path) -> None:
        """1,000 pause/continue calls from 10 clients through a worker kill and a router
        kill: every call answered in time, one pause state everywhere afterwards."""
        figures = Figures("pause/continue storm with worker and router SIGKILL")
        with fault_stack(tmp_path) as stack:
            asyncio.run(storm_and_settle(stack, figures))
            asyncio.run(continue_and_serve(stack, figures))
            figures.report()
            values = figures.values
            assert not figures.notes, figures.notes
            assert values["operations"] == OPERATIONS
            assert values["overdue"] == 0
            assert set(values["statuses"]) <= {"200", "503", "504"}
            assert values["agree"], values["final_states"]
            assert values["final_continue"] == 200
            assert values["request_after"] == Outcome.OK.value


async def pause_pending_at_router_death(stack: FaultStack, figures: Figures) -> Call:
    """A pause waits on a stopped worker; the router is SIGKILLed while it waits."""
    straggler = stack.pid("worker-w1")
    router = stack.pid("router")
    timeout_s = 2.0
    os.kill(straggler, signal.SIGSTOP)
    try:
        async with stack.async_admin() as admin:
            started = time.monotonic()
            body = {"mode": "in_place", "timeout_s": timeout_s}
            call = asyncio.create_task(
                admin.post("/api/pause", json=body, timeout=timeout_s + CLIENT_WAIT_S)
            )
            await asyncio.sleep(0.3)  # the barrier is pending: w1 cannot acknowledge
            os.kill(router, signal.SIGKILL)
            response = await call
            latency = time.monotonic() - started
    finally:
        os.kill(straggler, signal.SIGCONT)
    error = "" if response.status_code == 200 else response.text[:160]
    figures.set("status", response.status_code)
    figures.set("latency_s", latency)
    figures.set("timeout_s", timeout_s)
    figures.set("answer", error)
    async with stack.async_admin() as admin:
        await wait_restarted(stack, admin, "router", router, 60.0)
    return Call(
        0, "/api/pause", "in_place", started, timeout_s, latency, response.status_code, error
    )


class TestPendingBarrier:
    def test_answered_in_time_when_the_router_dies(self, tmp_path: Path) -> None:
        """A pause pending on a stopped worker when the router is SIGKILLed is answered
        (an error) within its timeout plus SLACK_S, not after the admin's read timeout."""
        figures = Figures("pause pending when the router is SIGKILLed")
        with fault_stack(tmp_path) as stack:
            call = asyncio.run(pause_pending_at_router_death(stack, figures))
            figures.report()
            assert call.status in (503, 504), call
            assert call.latency_s <= call.timeout_s + SLACK_S, call
