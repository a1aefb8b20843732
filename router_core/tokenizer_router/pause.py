"""The pause coordinator: every piece of pause state the tokenizer router keeps.

It owns the barrier (operations waiting for acknowledgements and the state the last one
set), when the pause state last changed, the latest outcomes, how many operations
finished each way and how long their barriers took. It starts operations (the broadcast
to every worker and the command to the engine), applies acknowledgements, and finishes
operations that completed, lost a participant or timed out, answering their callers.

Operation ids are ``<incarnation>-<seq>``: the router's incarnation is the one place its
identity enters an id. A restarted router starts from the :class:`DurableState` its
predecessor saved: in the same pause state, counting on from the same sequence number.
Pure: time comes in as an :class:`Instant`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final

from router_core.barrier import PauseBarrier, PauseOperation, PauseState
from router_core.control.replies import (
    OperationOutcome,
    OperationResult,
    PauseAction,
    PauseOperationCount,
)
from router_core.control.table import ReplyTo
from router_core.counters import Counters
from router_core.histogram import BARRIER_BUCKETS, HistogramSet
from router_core.registry import WorkerRegistry
from router_core.tokenizer_router.durable import DurableState
from router_core.tokenizer_router.effects import Answer, Effect, Instant, Send
from router_core.tokenizer_router.engine_events import EngineState
from router_core.traffic import BROADCAST
from router_core.wire import Kind, frame_message
from router_core.wire.control import (
    ENGINE,
    Acknowledgement,
    ContinueRequest,
    PauseContinueBroadcast,
    PauseMode,
    PauseRequest,
)

__all__ = ["RECENT_OPERATIONS", "BarrierThen", "PauseCoordinator"]

#: An internal caller's continuation: ``then(outcome, at)``, its effects.
BarrierThen = Callable[[OperationOutcome, Instant], list[Effect]]

#: Finished pause/continue operations kept for ``status``.
RECENT_OPERATIONS: Final = 20


class PauseCoordinator:
    """Pause state and history; the registry and the engine's liveness name the
    participants of each operation."""

    def __init__(
        self,
        registry: WorkerRegistry,
        engine: EngineState,
        counters: Counters,
        *,
        barrier_timeout_s: float,
        started_wall: float,
        incarnation: int = 0,
        restored: DurableState | None = None,
    ) -> None:
        self._registry = registry
        self._engine = engine
        self._counters = counters
        self.barrier_timeout_s = barrier_timeout_s
        if restored is None:
            self.barrier = PauseBarrier(incarnation)
        else:
            state = PauseState(
                paused=restored.paused,
                mode=restored.mode if restored.paused else None,
                op_id=restored.op_id,
                seq=restored.seq,
            )
            self.barrier = PauseBarrier(incarnation, first_seq=restored.seq + 1, state=state)
        #: Seconds from broadcast to answer, per operation (``pause``/``continue``).
        self.barrier_time = HistogramSet(BARRIER_BUCKETS)
        #: Finished operations per ``(operation, mode, result)``.
        self.finished: dict[tuple[PauseAction, str, OperationResult], int] = {}
        #: Outcomes of the latest finished operations, oldest first.
        self.recent: deque[OperationOutcome] = deque(maxlen=RECENT_OPERATIONS)
        #: When the pause state last changed (Unix seconds); None until the first change.
        self.state_since: float | None = None if restored is None else restored.since
        self._started_wall = started_wall

    # ------------------------------------------------------------------ views

    @property
    def state(self) -> PauseState:
        """The state the latest operation set: what late joiners start in."""
        return self.barrier.state

    @property
    def pending(self) -> list[PauseOperation]:
        """Operations still waiting, oldest first."""
        return self.barrier.pending

    def state_since_wall(self) -> float:
        """Unix seconds the pause state last changed (the router's start before any)."""
        return round(self.state_since or self._started_wall, 3)

    def finished_counts(self) -> list[PauseOperationCount]:
        """Finished operations by operation, mode and result, sorted."""
        return [
            PauseOperationCount(operation=op, mode=mode, result=result, count=count)
            for (op, mode, result), count in sorted(self.finished.items())
        ]

    def next_deadline(self) -> float | None:
        """The earliest deadline among pending operations (monotonic)."""
        return self.barrier.next_deadline()

    # ------------------------------------------------------------------ operations

    def start(
        self,
        *,
        is_pause: bool,
        mode: PauseMode | None,
        timeout_s: float | None,
        waiter: ReplyTo | BarrierThen | None,
        at: Instant,
    ) -> tuple[PauseOperation, list[Effect]]:
        """Open a pause or continue for every live worker and the engine (if live).
        ``waiter`` is answered when it finishes: a control request's reply address, or
        an internal continuation called with the outcome (:data:`BarrierThen`).

        Returns the operation and the broadcast and engine command to send. An
        operation with no participants is complete at once; the caller answers it.
        """
        if is_pause != self.barrier.state.paused or not self.state_since:
            self.state_since = at.wall
        workers = self._registry.workers()
        live = {record.worker_id for record in workers}
        if self._engine.is_live(at.mono):
            live.add(ENGINE)
        op = self.barrier.start(
            is_pause=is_pause,
            mode=mode,
            participants=live,
            timeout_s=self.barrier_timeout_s if timeout_s is None else timeout_s,
            now=at.mono,
            waiter=waiter,
        )
        broadcast = frame_message(
            Kind.PAUSE_BROADCAST, PauseContinueBroadcast(op.op_id, is_pause, op.mode)
        )
        effects: list[Effect] = [
            Send(record.address, broadcast, traffic=(BROADCAST, record.worker_id))
            for record in workers
        ]
        engine_message: PauseRequest | ContinueRequest = (
            PauseRequest(op.op_id, mode or "abort") if is_pause else ContinueRequest(op.op_id)
        )
        effects.append(
            Send(ENGINE, frame_message(Kind.PAUSE if is_pause else Kind.CONTINUE, engine_message))
        )
        self._counters.add("pause_operations", _action(op))
        return op, effects

    def acknowledge(self, ack: Acknowledgement, at: Instant) -> list[Effect]:
        """A participant applied ``ack.op_id``: record it (late ones too) and answer the
        operation if this completed it. A worker that acknowledged the current operation
        takes its state (paused or serving) unless it is draining."""
        record = self._registry.get(ack.participant)
        if record is not None:
            record.last_seen = at.mono
        pending = any(op.op_id == ack.op_id for op in self.barrier.pending)
        completed = self.barrier.acknowledge(ack.op_id, ack.participant)
        self._counters.add("acks", "pending" if pending else "late")
        state = self.barrier.state
        if (
            record is not None
            and record.state not in ("draining", "drained")
            and ack.op_id == state.op_id
        ):
            self._registry.transition(record, "paused" if state.paused else "serving")
        return self._finish([completed] if completed is not None else [], at)

    def depart(self, participant: str, at: Instant) -> list[Effect]:
        """A participant left: stop waiting for it; answer what that completed."""
        return self._finish(self.barrier.depart(participant), at)

    def expire(self, at: Instant) -> list[Effect]:
        """Answer every operation past its deadline, naming its stragglers."""
        return self._finish(self.barrier.expire(at.mono), at)

    def engine_command(self) -> Send | None:
        """The command that puts an engine in the current pause state (None before any
        operation): sent again to an engine the router has not seen apply it (a new
        engine incarnation, or the first load report after this router started). The
        engine's link ignores an operation it already applied."""
        state = self.barrier.state
        if not state.op_id:
            return None
        message: PauseRequest | ContinueRequest = (
            PauseRequest(state.op_id, state.mode or "abort")
            if state.paused
            else ContinueRequest(state.op_id)
        )
        kind = Kind.PAUSE if state.paused else Kind.CONTINUE
        return Send(
            ENGINE, frame_message(kind, message), counter=("engine_reapplied", kind.name.lower(), 1)
        )

    def outcome_of(self, op: PauseOperation, at: Instant) -> OperationOutcome:
        """The answer to a finished operation, also kept among the recent outcomes."""
        outcome = op.outcome(at.mono, round(at.wall, 3))
        self.recent.append(outcome)
        return outcome

    def _finish(self, ops: Iterable[PauseOperation], at: Instant) -> list[Effect]:
        """Record each finished operation and answer whoever waits for it."""
        effects: list[Effect] = []
        for op in ops:
            outcome = self.outcome_of(op, at)
            operation = _action(op)
            result: OperationResult = "complete" if op.complete else "timeout"
            key = (operation, op.mode or "none", result)
            self.finished[key] = self.finished.get(key, 0) + 1
            self.barrier_time.observe(operation, at.mono - op.started_at)
            waiter: Any = op.waiter
            if isinstance(waiter, ReplyTo):
                effects.append(Answer(waiter, outcome))
            elif callable(waiter):  # an internal caller (a weight update's next step)
                effects += waiter(outcome, at)
            if not op.complete:
                self._counters.add("pause_timeouts", operation)
        return effects


def _action(op: PauseOperation) -> PauseAction:
    return "pause" if op.is_pause else "continue"
