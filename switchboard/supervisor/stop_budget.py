"""How long each step of a stop may take, so that the whole stop ends within its grace.

An orchestrator gives a stopping process a grace period and then SIGKILLs it (Kubernetes:
``terminationGracePeriodSeconds``, 30 s by default; ``podman stop -t``). A SIGKILLed
supervisor loses its drain and leaves its children to die by their parent-death signal,
so the supervisor's whole stop, from the first signal to its exit, is bounded by
``stop_grace_s``. :class:`StopBudget` shares it out:

1. the drain waits at most ``drain_timeout_s``, and never past the point where the
   workers would no longer have ``graceful_timeout_s`` plus :data:`WORKER_EXIT_S`, and
   the rest :data:`STOP_RESERVE_S`;
2. the workers get SIGTERM and at most ``stop_timeout_s + graceful_timeout_s``, and never
   past the deadline minus :data:`STOP_RESERVE_S` (a worker ends what it still holds with
   an abort at its graceful timeout, so its clients read a finish reason, not a cut, and
   it needs :data:`WORKER_EXIT_S` after that to send the aborts and exit);
3. every later group at most ``stop_timeout_s``, and never past the deadline (by then they
   hold nothing, and stop in a fraction of a second).

Each step gets at least :data:`MIN_STEP_S`, so a late step still asks before it kills.
Pure: the clock is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["MIN_STEP_S", "STOP_RESERVE_S", "WORKER_EXIT_S", "StopBudget", "least_grace_s"]

#: Seconds of the grace kept, after the workers, for the children stopped after them.
STOP_RESERVE_S: Final = 3.0
#: Seconds a worker past its graceful timeout needs to end what it holds and exit.
WORKER_EXIT_S: Final = 1.5
#: The least time a step of the stop gets before SIGKILL.
MIN_STEP_S: Final = 0.2


def least_grace_s(graceful_timeout_s: float) -> float:
    """The shortest ``stop_grace_s`` that leaves workers of ``graceful_timeout_s`` their
    graceful time and the rest of the stack its reserve."""
    return graceful_timeout_s + WORKER_EXIT_S + STOP_RESERVE_S


@dataclass(frozen=True)
class StopBudget:
    """The deadline of one stop and the settings that share it out."""

    deadline: float
    drain_timeout_s: float
    graceful_timeout_s: float
    stop_timeout_s: float

    @classmethod
    def starting(
        cls,
        now: float,
        *,
        grace_s: float,
        drain_timeout_s: float,
        graceful_timeout_s: float,
        stop_timeout_s: float,
    ) -> StopBudget:
        """The budget of a stop asked for at ``now``."""
        return cls(now + grace_s, drain_timeout_s, graceful_timeout_s, stop_timeout_s)

    def drain_s(self, now: float) -> float:
        """How long the drain may wait from ``now`` (0: not at all)."""
        left = self.deadline - now - self.graceful_timeout_s - WORKER_EXIT_S - STOP_RESERVE_S
        return max(0.0, min(self.drain_timeout_s, left))

    def group_s(self, role: str, now: float) -> float:
        """How long a group of children of ``role``, sent SIGTERM at ``now``, may take
        before SIGKILL."""
        if role == "worker":
            wanted = self.stop_timeout_s + self.graceful_timeout_s
            left = self.deadline - now - STOP_RESERVE_S
        else:
            wanted, left = self.stop_timeout_s, self.deadline - now
        return max(MIN_STEP_S, min(wanted, left))
