"""SIGKILL of the supervisor itself under streaming load: its children die with it.

Nothing can restart a killed supervisor, so what must hold is that it leaves nothing
behind: every child (found by pid before the kill) exits on its own within
:data:`ORPHAN_BOUND_S` (``PR_SET_PDEATHSIG``, ``docs/operating.md`` section 6), no
socket file is left in the run directory, and no client is left hanging: every request
ends exactly or with a clear error, none with a wrong text.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load
from tests.fault.harness.procfs import alive
from tests.fault.harness.stack import FaultStack, fault_stack
from tests.integration.harness.polling import socket_files

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

#: Children must be gone this long after the supervisor died (they stop cleanly on the
#: SIGTERM the kernel sends them; a worker drains its in-flight requests first).
ORPHAN_BOUND_S = 20.0
REQUESTS = 200
WARM = 60


async def kill_supervisor_under_load(stack: FaultStack, figures: Figures) -> Load:
    plan = RequestPlan.build("kill-supervisor")
    census = ConnectionCensus(stack.port, stack.workers)
    # Clients back off a little after a failure: once the workers are gone every attempt
    # is refused at once.
    async with Load(
        stack.base_url, plan, label="kill-supervisor", census=census, error_pause_s=0.25
    ) as load:
        load.closed(24)
        await load.wait_for(lambda: len(load.ended()) >= WARM, 60.0, f"{WARM} warm-up requests")
        children = stack.roles()
        killed_at = time.monotonic()
        stack.kill_supervisor()
        exited: dict[str, float] = {}
        deadline = killed_at + ORPHAN_BOUND_S
        while len(exited) < len(children) and time.monotonic() < deadline:
            for role, pid in children.items():
                if role not in exited and not alive(pid):
                    exited[role] = time.monotonic() - killed_at
            await asyncio.sleep(0.05)
        orphans = {role: pid for role, pid in children.items() if role not in exited}
        figures.set("children", len(children))
        figures.set("children_gone_s", None if orphans else max(exited.values()))
        figures.set("orphans", orphans)
        figures.note("exited after: " + ", ".join(f"{r} {t:.1f}s" for r, t in exited.items()))
        await load.wait_for(lambda: load.issued >= REQUESTS, 30.0, f"{REQUESTS} requests")
        in_flight = [record for record in load.records if record.in_flight_at(killed_at)]
    figures.outcomes(load.records)
    figures.outcomes(in_flight, "in flight at kill")
    ends = [record.ended for record in in_flight if record.ended is not None]
    figures.set("in_flight_ended_within_s", max(ends) - killed_at if ends else None)
    figures.set("requests", load.issued)
    return load


class TestKillSupervisor:
    def test_children_die_with_it_and_no_client_hangs(self, tmp_path: Path) -> None:
        """SIGKILL the supervisor after 60 of 200+ requests: every child gone by pid, no
        socket file left, every request exact or a clear error."""
        figures = Figures("SIGKILL supervisor")
        with fault_stack(tmp_path) as stack:
            load = asyncio.run(kill_supervisor_under_load(stack, figures))
            leftover = [path.name for path in socket_files(stack.run_dir)]
            figures.set("socket_files_left", leftover)
            figures.failures(load.records)
            figures.report()
            assert figures.values["orphans"] == {}, "children outlived the supervisor"
            assert leftover == []
            assert figures.counts["all"]["wrong text"] == 0
            assert figures.counts["all"]["hung"] == 0
            assert load.issued >= REQUESTS
