"""SIGTERM to the supervisor under streaming load: in-flight requests finish, none is lost.

The supervisor drains the workers before it stops anything (``docs/operating.md``,
section 6): every request in flight when SIGTERM arrives (its stream already started:
a worker had taken it) must end exactly (0 lost outputs) within the workers' grace
period (``graceful_timeout_s``, 10 s by default), and the supervisor must exit 0 with
nothing left running. Requests a worker had not answered yet, and those clients keep
sending after the signal, may be refused (503, a refused connection), never answered
with a wrong text or left hanging.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load, RequestRecord
from tests.fault.harness.stack import STOP_S, FaultStack, fault_stack

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

GRACE_S = 10.0
WARM = 30


async def terminate_under_load(stack: FaultStack, figures: Figures) -> list[RequestRecord]:
    plan = RequestPlan.build("sigterm", min_tokens=256, max_tokens=768)
    census = ConnectionCensus(stack.port, stack.workers)
    async with Load(
        stack.base_url, plan, label="sigterm", census=census, error_pause_s=0.1
    ) as load:
        load.closed(24)
        await load.wait_for(lambda: len(load.ended()) >= WARM, 60.0, f"{WARM} warm-up requests")
        termed_at = time.monotonic()
        stack.supervisor.send_signal(signal.SIGTERM)
        exited_at = await load.wait_for(
            lambda: stack.supervisor.poll() is not None, STOP_S, "the supervisor to exit"
        )
    in_flight = [
        record
        for record in load.records
        if record.responded is not None
        and record.responded < termed_at
        and record.in_flight_at(termed_at)
    ]
    taken = {record.rid for record in in_flight}
    after = [
        record
        for record in load.records
        if record.rid not in taken and (record.ended is None or record.ended > termed_at)
    ]
    ends = [record.ended - termed_at for record in in_flight if record.ended is not None]
    figures.outcomes(in_flight, "in flight at SIGTERM")
    figures.outcomes(after, "not yet answered at SIGTERM, or sent after")
    figures.set("in_flight", len(in_flight))
    figures.set("in_flight_done_within_s", max(ends) if ends else None)
    figures.set("supervisor_exit_s", exited_at - termed_at)
    figures.set("exit_status", stack.supervisor.returncode)
    figures.failures(load.records)
    return in_flight


class TestSigterm:
    def test_in_flight_requests_finish(self, tmp_path: Path) -> None:
        """SIGTERM after 30 requests ended, 24 streams in flight: each in-flight one ends
        exactly within the grace period; the supervisor exits 0."""
        figures = Figures("SIGTERM supervisor under load")
        with fault_stack(tmp_path) as stack:
            in_flight = asyncio.run(terminate_under_load(stack, figures))
            figures.report()
            assert figures.values["exit_status"] == 0
            lost = [r.describe() for r in in_flight if r.outcome is not Outcome.OK]
            assert lost == [], lost
            assert figures.values["in_flight_done_within_s"] <= GRACE_S
            after = figures.counts["not yet answered at SIGTERM, or sent after"]
            assert after["wrong text"] == 0 and after["hung"] == 0
