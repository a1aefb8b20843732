"""Restart backoff: doubling delays, capped, forgiven after a healthy run."""

from __future__ import annotations

from switchboard.supervisor.backoff import RestartBackoff


class TestRestartBackoff:
    """Doubling delays, capped, forgiven after a healthy run."""

    def test_doubles_up_to_the_cap(self) -> None:
        """Quick crashes wait initial, 2x, 4x ... never beyond the maximum."""
        backoff = RestartBackoff(initial_s=0.5, max_s=3.0, reset_after_s=30.0)
        assert [backoff.next_delay(1.0) for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]

    def test_healthy_run_resets(self) -> None:
        """A child that ran past reset_after_s restarts after the initial delay again."""
        backoff = RestartBackoff(initial_s=0.5, max_s=10.0, reset_after_s=30.0)
        for _ in range(4):
            backoff.next_delay(0.1)
        assert backoff.next_delay(31.0) == 0.5
        assert backoff.next_delay(0.1) == 1.0

    def test_many_crashes_do_not_overflow(self) -> None:
        """Thousands of crashes in a row still give the cap."""
        backoff = RestartBackoff(initial_s=0.5, max_s=10.0, reset_after_s=30.0)
        for _ in range(5000):
            delay = backoff.next_delay(0.0)
        assert delay == 10.0
