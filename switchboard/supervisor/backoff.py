"""How long to wait before restarting a crashed child: doubling delays, forgiven after a while."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RestartBackoff"]


@dataclass
class RestartBackoff:
    """Delays ``initial_s``, ``2 * initial_s``, ... capped at ``max_s``, for one child.

    A child that ran at least ``reset_after_s`` before it exited was healthy: its next
    restart waits ``initial_s`` again, so one crash a day never waits the maximum.
    """

    initial_s: float
    max_s: float
    reset_after_s: float
    #: Crashes in a row, each after less than ``reset_after_s`` of running.
    failures: int = 0

    def next_delay(self, uptime_s: float) -> float:
        """The delay before restarting a child that exited after ``uptime_s`` seconds."""
        if uptime_s >= self.reset_after_s:
            self.failures = 0
        # The exponent is bounded so that a child crashing for days cannot overflow it.
        delay = min(self.max_s, math.ldexp(self.initial_s, min(self.failures, 64)))
        self.failures += 1
        return delay
