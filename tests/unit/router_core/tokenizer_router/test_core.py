"""The core's timers: when the next one is due, and what a tick does."""

from __future__ import annotations

from tests.unit.router_core.tokenizer_router.shell import CoreShell, answers


class TestTimers:
    """next_due names the earliest timer; tick runs the ones due."""

    def test_the_expiry_check_is_due_a_few_times_per_timeout(self) -> None:
        """After a tick, the next expiry check is a quarter timeout (at most 0.25 s) on."""
        shell = CoreShell(heartbeat_timeout_s=2.0)
        _, due = shell.core.tick(shell.at)
        assert due == shell.at.mono + 0.25 == shell.core.next_due()

    def test_a_barrier_deadline_sooner_than_the_check_is_next(self) -> None:
        """A pending operation whose deadline comes first makes that deadline next due."""
        shell = CoreShell()
        shell.register("w1")
        shell.core.tick(shell.at)
        shell.command("pause", mode="abort", timeout_s=0.05)
        assert shell.core.next_due() == shell.at.mono + 0.05
        shell.advance(0.05)
        (answer,) = answers(shell.tick())
        assert answer.outcome.stragglers == ["w1"]
        assert shell.core.next_due() == shell.at.mono - 0.05 + 0.25
