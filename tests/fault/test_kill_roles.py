"""SIGKILL of each supervised role under streaming load: nothing wrong, nothing hung.

Each test starts its own stack, runs at least 200 streaming requests (``/generate`` and
``/v1/completions``) from 24 clients, SIGKILLs one role once 60 have ended, and keeps
the load going until the supervisor has restarted the role and 20 requests sent after
that ended exactly. Every request is classified against the engine's predictable text.
What must hold: no wrong text, no hung request, every request off the killed role's
path (see ``harness/scenario.py``) exact, and the stack exact again after the restart.
The figures: the counts, the recovery time (kill to the end of the first exact request
sent after it), the path's recovery and the role's restart time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fault.harness.classify import Outcome
from tests.fault.harness.detok_paths import assign_detokenizers
from tests.fault.harness.modes import scaled
from tests.fault.harness.scenario import KillRun, kill_during_load
from tests.fault.harness.stack import StackConfig, fault_stack

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

REQUESTS = scaled(200, 2000)


def check(run: KillRun, name: str, requests: int = REQUESTS) -> None:
    """Report the run's figures, then assert what must hold (at least ``requests`` sent)."""
    run.figures(name).report()
    outcomes = [record.outcome for record in run.records]
    assert not run.problems, run.problems
    assert len(run.records) >= requests
    assert outcomes.count(Outcome.WRONG_TEXT) == 0, "wrong texts (see the figures)"
    assert outcomes.count(Outcome.HUNG) == 0, "hung requests (see the figures)"
    failed_off_path = [r.describe() for r in run.unaffected() if r.outcome is not Outcome.OK]
    assert failed_off_path == [], failed_off_path[:10]


class TestKillRole:
    """One role SIGKILLed under load; each test its own stack."""

    @pytest.mark.parametrize("victim", ["worker-w1", "router", "detok-router", "engine", "admin"])
    def test_kill(self, tmp_path: Path, victim: str) -> None:
        """The role comes back, in-flight requests on its path end exactly or with a clear
        error, and every other request is exact."""
        with fault_stack(tmp_path) as stack:
            run = asyncio.run(kill_during_load(stack, victim, f"kill-{victim}", requests=REQUESTS))
            check(run, f"SIGKILL {victim}")

    def test_kill_router_on_the_output_path(self, tmp_path: Path) -> None:
        """With ``--outputs-via router`` the router carries every output too: it comes
        back and requests still end exactly or with a clear error."""
        config = StackConfig(extra_args=("--outputs-via", "router"))
        with fault_stack(tmp_path, config) as stack:
            run = asyncio.run(
                kill_during_load(stack, "router", "kill-router-outputs", requests=REQUESTS)
            )
            check(run, "SIGKILL router (outputs via router)")

    def test_kill_detokenizer(self, tmp_path: Path) -> None:
        """A detokenizer comes back; the worker it did not serve sees only exact requests."""
        with fault_stack(tmp_path, StackConfig(workers=2, detokenizers=2)) as stack:

            async def scenario() -> KillRun:
                served = await assign_detokenizers(stack, "kill-detok")
                return await kill_during_load(
                    stack,
                    "detokenizer-0",
                    "kill-detokenizer-0",
                    requests=REQUESTS,
                    detokenizer_workers=served,
                )

            check(asyncio.run(scenario()), "SIGKILL detokenizer-0")
