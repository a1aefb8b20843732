"""The admin app SIGKILLed while workers forward SGLang's operator calls to it, under load.

SGLang's ``/pause_generation`` and ``/continue_generation`` on the serving port are the
admin app's barrier: the worker that takes a call forwards it with its caller's token
(``switchboard/worker/admin_client.py``). Four clients send :data:`OPERATIONS` of them
through the serving port while streaming generations run; when :data:`KILL_AT` have
started the admin app is stopped (SIGSTOP) for :data:`STOPPED_S`, so that every client's
call is in flight in it, then SIGKILLed: those calls lose their answer. Calls from
:data:`BACK_GATE` on wait until the supervisor has it back. What must hold:

* every call is answered within its ``timeout_s`` plus :data:`SLACK_S`: 200, a
  barrier's 504, or a 503 whose ``cause`` is ``admin_unavailable``, the calls cut by
  the kill included (one per client); never a wait on a dead peer;
* the generations each complete exactly or end with a clear error: never a wrong text,
  never a hang;
* afterwards the router, every worker and the engine are in one pause state, within
  :data:`SETTLE_S` (the barrier's state is the router's, which the kill did not touch);
* a continue through the serving port then completes and a request comes back exact.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load
from tests.fault.harness.modes import scaled
from tests.fault.harness.operator_storm import Call, Storm, overdue, storm_client
from tests.fault.harness.pause_agreement import SETTLE_S, settle
from tests.fault.harness.recovery import wait_restarted
from tests.fault.harness.stack import FaultStack, fault_stack

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(600)]

OPERATIONS = scaled(200, 2000)
CLIENTS = 4
KILL_AT = OPERATIONS * 30 // 100
#: Operations from here on wait for the admin app to be back (and, as a safety gate,
#: for the kill to have happened).
BACK_GATE = OPERATIONS * 70 // 100
#: Streaming clients generating while the storm runs.
STREAMS = 4
#: What an answer may take beyond the timeout it was asked for.
SLACK_S = 2.0
#: How long the admin app is stopped before it is killed: calls pile up in it.
STOPPED_S = 0.3


def serving(stack: FaultStack) -> httpx.AsyncClient:
    """A client of the serving port with the operator's token (forwarded as it is)."""
    return httpx.AsyncClient(
        base_url=stack.base_url,
        headers={"Authorization": f"Bearer {stack.token}"},
        trust_env=False,
    )


def why(answer: httpx.Response) -> str:
    """A refused call's ``cause``, the word the worker's error body names it by."""
    try:
        return str(answer.json()["error"]["cause"])
    except (ValueError, KeyError, TypeError):
        return f"{answer.status_code} without a cause: {answer.text[:80]}"


async def forwarding_client(
    stack: FaultStack, storm: Storm, rng: random.Random, count: int
) -> None:
    async with serving(stack) as client:
        paths = ("/pause_generation", "/continue_generation")
        await storm_client(client, storm, rng, count, paths=paths, why=why)


async def kill_admin(
    stack: FaultStack, storm: Storm, back: asyncio.Event, figures: Figures
) -> float:
    """Once :data:`KILL_AT` calls have started, stop the admin app for :data:`STOPPED_S`,
    SIGKILL it and wait until it is back; ``back`` is set then (or on failure). Returns
    the ``time.monotonic()`` of the SIGKILL."""
    try:
        while storm.started < KILL_AT:
            await asyncio.sleep(0.001)
        old = stack.pid("admin")
        os.kill(old, signal.SIGSTOP)
        await asyncio.sleep(STOPPED_S)
        killed_at = time.monotonic()
        os.kill(old, signal.SIGKILL)
        figures.set("killed_at_operation", storm.started)
        async with stack.async_admin() as admin:
            _new, ready_at = await wait_restarted(stack, admin, "admin", old, 60.0)
        figures.set("admin_restart_s", ready_at - killed_at)
        return killed_at
    finally:
        back.set()


def call_figures(calls: list[Call], killed_at: float | None, figures: Figures) -> None:
    """How the storm's calls were answered, and those cut by the kill."""
    late = overdue(calls, SLACK_S)
    figures.set("operations", len(calls))
    figures.set("statuses", dict(Counter(str(call.status) for call in calls)))
    figures.set("codes", dict(Counter(call.error for call in calls if call.error)))
    figures.set("max_over_timeout_s", max(c.latency_s - c.timeout_s for c in calls))
    figures.set("overdue", len(late))
    cut = [c for c in calls if killed_at is not None and c.in_flight_at(killed_at)]
    figures.set("in_flight_at_kill", len(cut))
    figures.set("cut_codes", dict(Counter(call.error for call in cut)))
    for call in late[:10]:
        figures.note(f"overdue: {call}")


async def storm_under_load(stack: FaultStack, figures: Figures) -> None:
    plan = RequestPlan.build("forwarded", size=64)
    async with Load(stack.base_url, plan, label="forwarded") as load:
        load.closed(STREAMS)
        back = asyncio.Event()
        storm = Storm([(BACK_GATE, back)])
        rng = random.Random(20261207)
        share = OPERATIONS // CLIENTS
        clients = [
            forwarding_client(stack, storm, random.Random(rng.random()), share)
            for _ in range(CLIENTS)
        ]
        fault = asyncio.create_task(kill_admin(stack, storm, back, figures))
        await asyncio.gather(*clients)
        killed_at = None
        try:
            killed_at = await fault
        except AssertionError as exc:
            figures.note(f"fault: {exc}")
        call_figures(storm.calls, killed_at, figures)
        await settle(stack, figures, SETTLE_S)
        async with serving(stack) as client:
            answer = await client.post("/continue_generation", json={"timeout_s": 5}, timeout=30)
        figures.set("final_continue", answer.status_code)
        await load.stop()
        figures.set("requests", len(load.ended()))
        figures.set("outcomes", dict(Counter(r.outcome.value for r in load.ended())))
        figures.failures(load.ended())
        after = await load.request()
        figures.set("request_after", after.outcome.value)


class TestAdminKilledMidForward:
    def test_calls_answered_in_time_and_one_state_after(self, tmp_path: Path) -> None:
        """Operator calls through the serving port across an admin app SIGKILL under load:
        each answered in time, the streams exact or clearly ended, one state after."""
        figures = Figures("SIGKILL admin app during forwarded pause/continue")
        with fault_stack(tmp_path) as stack:
            asyncio.run(storm_under_load(stack, figures))
            figures.report()
            values = figures.values
            assert values["operations"] == OPERATIONS
            assert values["overdue"] == 0, figures.notes
            assert set(values["statuses"]) <= {"200", "503", "504"}, values["statuses"]
            assert "killed_at_operation" in values, figures.notes
            codes = set(values["codes"])
            assert codes <= {"admin_unavailable", "barrier_timeout"}, codes
            assert "admin_unavailable" in codes, "no call met the admin app down"
            assert values["in_flight_at_kill"] == CLIENTS, "every client's call was in flight"
            outcomes = values["outcomes"]
            assert outcomes.get(Outcome.OK.value, 0) > 0, outcomes
            assert not {Outcome.WRONG_TEXT.value, Outcome.HUNG.value} & set(outcomes), figures.notes
            assert values["agree"], values["final_states"]
            assert values["final_continue"] == 200
            assert values["request_after"] == Outcome.OK.value
