"""Pause/continue as a barrier: bookkeeping for operations waiting on acknowledgements.

Pure: no sockets, time passed in. Each operation has its own id and its own waiter, so
concurrent operations never share (or orphan) a reply slot; acknowledgements carry the
operation id, so a late acknowledgement of an older operation completes that one only.

An operation id is ``<incarnation>-<seq>`` (both decimal): ``incarnation`` names the
barrier's owner (a router start; each start has a larger one), ``seq`` counts up from
``first_seq`` (a restarted router goes on from the count it persisted). Workers and the
engine order operations by ``(incarnation, seq)``
(:func:`router_core.wire.control.op_order`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from router_core.control.replies import OperationOutcome
from router_core.wire.control import PauseMode

__all__ = ["PauseBarrier", "PauseOperation", "PauseState"]


@dataclass(frozen=True)
class PauseState:
    """The pause state set by the most recent operation: what late joiners start in."""

    paused: bool = False
    mode: PauseMode | None = None
    op_id: str = ""
    seq: int = 0


@dataclass
class PauseOperation:
    """One pause or continue waiting for its participants.

    ``waiter`` is opaque to the barrier: whatever the caller needs to send the answer.
    """

    op_id: str
    seq: int
    is_pause: bool
    mode: PauseMode | None
    expected: frozenset[str]
    started_at: float
    deadline: float
    waiter: Any = None
    acked: set[str] = field(default_factory=set)
    departed: set[str] = field(default_factory=set)

    @property
    def outstanding(self) -> set[str]:
        """Participants that have neither acknowledged nor left."""
        return set(self.expected) - self.acked - self.departed

    @property
    def complete(self) -> bool:
        """Every participant acknowledged (or left the registry)."""
        return not self.outstanding

    def outcome(self, now: float, finished_at: float = 0.0) -> OperationOutcome:
        """The answer to send back: who acknowledged and, after a timeout, who did not.

        ``now`` is on the clock of ``started_at``; ``finished_at`` is Unix seconds.
        """
        return OperationOutcome(
            op_id=self.op_id,
            seq=self.seq,
            action="pause" if self.is_pause else "continue",
            mode=self.mode,
            complete=self.complete,
            acked=sorted(self.acked),
            stragglers=sorted(self.outstanding),
            departed=sorted(self.departed),
            elapsed_s=round(now - self.started_at, 4),
            finished_at=finished_at,
        )


class PauseBarrier:
    """Operations in flight, keyed by id, and the pause state the last one set."""

    def __init__(
        self, incarnation: int = 0, *, first_seq: int = 1, state: PauseState | None = None
    ) -> None:
        if incarnation < 0 or first_seq < 1:
            raise ValueError("incarnation >= 0 and first_seq >= 1 are required")
        self.incarnation = incarnation
        #: The last sequence number handed out (``first_seq - 1`` before the first).
        self.last_seq = first_seq - 1
        self._pending: dict[str, PauseOperation] = {}
        #: Where late joiners start: a restored state, or not paused.
        self.state = state or PauseState()

    @property
    def pending(self) -> list[PauseOperation]:
        """Operations still waiting, oldest first."""
        return list(self._pending.values())

    def start(
        self,
        *,
        is_pause: bool,
        mode: PauseMode | None,
        participants: set[str],
        timeout_s: float,
        now: float,
        waiter: Any = None,
    ) -> PauseOperation:
        """Open an operation; it becomes the pause state late joiners start in.

        With no participants the operation is complete at once; the caller answers it.
        """
        self.last_seq = seq = self.last_seq + 1
        op = PauseOperation(
            op_id=f"{self.incarnation}-{seq}",
            seq=seq,
            is_pause=is_pause,
            mode=mode if is_pause else None,
            expected=frozenset(participants),
            started_at=now,
            deadline=now + timeout_s,
            waiter=waiter,
        )
        self.state = PauseState(paused=is_pause, mode=op.mode, op_id=op.op_id, seq=seq)
        if not op.complete:
            self._pending[op.op_id] = op
        return op

    def acknowledge(self, op_id: str, participant: str) -> PauseOperation | None:
        """Record an acknowledgement; return the operation if this completed it."""
        op = self._pending.get(op_id)
        if op is None or participant not in op.expected:
            return None
        op.acked.add(participant)
        if op.complete:
            del self._pending[op_id]
            return op
        return None

    def depart(self, participant: str) -> list[PauseOperation]:
        """A participant left (dead or deregistered); return operations this completed."""
        done = []
        for op in list(self._pending.values()):
            if participant in op.outstanding:
                op.departed.add(participant)
                if op.complete:
                    del self._pending[op.op_id]
                    done.append(op)
        return done

    def expire(self, now: float) -> list[PauseOperation]:
        """Remove and return operations past their deadline (answered with stragglers)."""
        late = [op for op in self._pending.values() if op.deadline <= now]
        for op in late:
            del self._pending[op.op_id]
        return late

    def next_deadline(self) -> float | None:
        """The earliest deadline among pending operations."""
        if not self._pending:
            return None
        return min(op.deadline for op in self._pending.values())
