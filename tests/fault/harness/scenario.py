"""SIGKILL one role of a stack under streaming load, and sort the requests by path.

:func:`kill_during_load` runs closed-loop load, kills ``role`` once ``warm`` requests have
ended, waits until the supervisor has it back (:func:`wait_restarted`), and keeps the
load going until at least ``requests`` were sent and ``after_ready`` requests sent after
the restart ended exactly. The :class:`KillRun` it returns says, per request, whether it
was on the killed role's path while the role was down:

* the admin app is on no request's path;
* a worker or a detokenizer is on the path of the requests of that worker (of the
  workers that detokenizer serves), found by connection (:class:`ConnectionCensus`); a
  request whose worker is unknown counts as on the path;
* the router, the detokenizer router and the engine are on every request's path.

Requests that ended before the kill or started after the role was ready again are on
no affected path either.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load, RequestRecord
from tests.fault.harness.recovery import wait_restarted
from tests.fault.harness.stack import FaultStack

__all__ = ["KillRun", "kill_during_load"]

#: How long the load may go on after the kill waiting for enough exact requests.
AFTER_FAULT_S = 60.0


@dataclass
class KillRun:
    """One kill under load, and every request sent around it."""

    role: str
    victim_pid: int
    fault_at: float
    records: list[RequestRecord]
    #: Whether a request's path goes through the killed role.
    on_path: Callable[[RequestRecord], bool]
    #: The stack's engine (``sim`` or ``llama-cpp``), named in the figures.
    engine: str = "sim"
    new_pid: int | None = None
    ready_at: float | None = None
    problems: list[str] = field(default_factory=list)

    def affected(self, record: RequestRecord) -> bool:
        """On the killed role's path while it was down."""
        if record.ended is not None and record.ended <= self.fault_at:
            return False
        if self.ready_at is not None and record.started >= self.ready_at:
            return False
        return self.on_path(record)

    def unaffected(self) -> list[RequestRecord]:
        return [record for record in self.records if not self.affected(record)]

    def in_flight_at_fault(self) -> list[RequestRecord]:
        return [record for record in self.records if record.in_flight_at(self.fault_at)]

    def first_exact_after(self, where: Callable[[RequestRecord], bool]) -> float | None:
        """Seconds from the kill to the end of the first exact request sent after it
        (among those ``where`` accepts); None if there is none."""
        ends = [
            record.ended
            for record in self.records
            if record.started > self.fault_at
            and record.ended is not None
            and record.outcome is Outcome.OK
            and where(record)
        ]
        return min(ends) - self.fault_at if ends else None

    def figures(self, test: str) -> Figures:
        """Counts overall, in flight at the kill and off the affected path; recovery times."""
        figures = Figures(test, self.engine)
        figures.outcomes(self.records)
        figures.outcomes(self.in_flight_at_fault(), "in flight at kill")
        figures.outcomes(self.unaffected(), "off the killed path")
        figures.set("requests", len(self.records))
        figures.set("recovery_s", self.first_exact_after(lambda record: True))
        figures.set("path_recovery_s", self.first_exact_after(self.on_path))
        figures.set("restart_s", None if self.ready_at is None else self.ready_at - self.fault_at)
        errors = [
            r.ended - r.started
            for r in self.records
            if r.ended is not None and r.verdict is not None and r.outcome is Outcome.CLEAR_ERROR
        ]
        figures.set("slowest_clear_error_s", max(errors) if errors else None)
        figures.set("victim_pid", self.victim_pid)
        figures.set("new_pid", self.new_pid)
        figures.failures(self.records)
        for record in self.unaffected():
            if record.outcome is Outcome.CLEAR_ERROR:
                figures.note(f"unaffected but failed: {record.describe()}")
        figures.notes += self.problems
        return figures


def path_of(role: str, detokenizer_workers: dict[str, set[str]]) -> Callable[[RequestRecord], bool]:
    """Whether a request's path goes through ``role`` (see the module docstring)."""
    if role == "admin":
        return lambda record: False
    if role.startswith("worker-"):
        return lambda record: record.worker in (role, None)
    if role.startswith("detokenizer-"):
        served = detokenizer_workers.get(role, set())
        return lambda record: record.worker is None or record.worker in served
    return lambda record: True


async def kill_during_load(
    stack: FaultStack,
    role: str,
    label: str,
    *,
    requests: int = 200,
    warm: int = 60,
    after_ready: int = 20,
    concurrency: int = 24,
    detokenizer_workers: dict[str, set[str]] | None = None,
    plan: RequestPlan | None = None,
) -> KillRun:
    """SIGKILL ``role`` under load (see the module docstring) and return what happened;
    the requests are ``plan``'s (default: the built-in engine's for ``label``)."""
    plan = plan or RequestPlan.build(label)
    census = ConnectionCensus(stack.port, stack.workers)
    async with (
        stack.async_admin() as admin,
        Load(stack.base_url, plan, label=label, census=census, model=stack.model) as load,
    ):
        load.closed(concurrency)
        await load.wait_for(lambda: len(load.ended()) >= warm, 60.0, f"{warm} warm-up requests")
        victim = stack.pid(role)
        census.refresh()
        fault_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        run = KillRun(
            role,
            victim,
            fault_at,
            load.records,
            path_of(role, detokenizer_workers or {}),
            engine=stack.config.engine,
        )
        try:
            run.new_pid, run.ready_at = await wait_restarted(stack, admin, role, victim, 60.0)
        except AssertionError as exc:
            run.problems.append(str(exc))

        def enough() -> bool:
            ready_at = run.ready_at if run.ready_at is not None else float("inf")
            exact_after = load.count(Outcome.OK, lambda record: record.started >= ready_at)
            return load.issued >= requests and exact_after >= after_ready

        try:
            await load.wait_for(enough, AFTER_FAULT_S, f"{after_ready} exact requests after ready")
        except AssertionError as exc:
            run.problems.append(str(exc))
    return run
