"""Tests for the pause barrier: completion, stragglers, departures and concurrent operations."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from router_core.barrier import PauseBarrier, PauseOperation, PauseState

PARTICIPANTS = ("engine", "w1", "w2", "w3")


def start(
    barrier: PauseBarrier,
    participants: set[str],
    *,
    now: float = 0.0,
    timeout_s: float = 5.0,
    is_pause: bool = True,
) -> PauseOperation:
    """Start an abort-mode pause (or a continue) for ``participants``."""
    return barrier.start(
        is_pause=is_pause,
        mode="abort",
        participants=participants,
        timeout_s=timeout_s,
        now=now,
    )


class TestPauseBarrier:
    """PauseBarrier: one operation's life from start to its answer."""

    def test_completes_when_all_acknowledge(self) -> None:
        """The last acknowledgement returns the operation; earlier ones return None."""
        barrier = PauseBarrier(3)
        op = start(barrier, {"engine", "w1"})
        assert barrier.acknowledge(op.op_id, "engine") is None
        assert barrier.pending == [op]
        assert barrier.acknowledge(op.op_id, "w1") is op
        assert op.complete
        assert barrier.pending == []
        assert op.outcome(now=1.0).acked == ["engine", "w1"]

    def test_duplicate_ack_does_not_complete(self) -> None:
        """Acknowledging twice counts once."""
        barrier = PauseBarrier()
        op = start(barrier, {"a", "b"})
        barrier.acknowledge(op.op_id, "a")
        assert barrier.acknowledge(op.op_id, "a") is None
        assert barrier.pending == [op]

    def test_unknown_op_and_stranger_are_ignored(self) -> None:
        """Acks for an unknown op or from a non-participant change nothing."""
        barrier = PauseBarrier()
        op = start(barrier, {"a"})
        assert barrier.acknowledge("no-such-op", "a") is None
        assert barrier.acknowledge(op.op_id, "stranger") is None
        assert op.acked == set()
        assert barrier.pending == [op]

    def test_ack_after_completion_is_ignored(self) -> None:
        """An acknowledgement of an already answered operation returns None."""
        barrier = PauseBarrier()
        op = start(barrier, {"a"})
        assert barrier.acknowledge(op.op_id, "a") is op
        assert barrier.acknowledge(op.op_id, "a") is None

    def test_zero_participants_complete_at_once(self) -> None:
        """With nobody to wait for, the operation is complete and never pending."""
        barrier = PauseBarrier()
        op = start(barrier, set())
        assert op.complete
        assert barrier.pending == []
        assert barrier.next_deadline() is None
        assert barrier.state.op_id == op.op_id

    def test_concurrent_operations_complete_independently(self) -> None:
        """Interleaved acks of two operations each complete their own, none is orphaned."""
        barrier = PauseBarrier()
        first = start(barrier, {"a", "b"})
        second = start(barrier, {"a", "b"}, is_pause=False)
        assert barrier.acknowledge(second.op_id, "a") is None
        assert barrier.acknowledge(first.op_id, "b") is None
        assert barrier.acknowledge(first.op_id, "a") is first
        assert barrier.pending == [second]
        assert barrier.acknowledge(second.op_id, "b") is second
        assert barrier.pending == []
        assert first.op_id != second.op_id

    def test_expire_returns_timed_out_ops_with_stragglers(self) -> None:
        """Past its deadline an operation is returned once, naming who never answered."""
        barrier = PauseBarrier()
        early = start(barrier, {"engine", "w1", "w2"}, now=10.0, timeout_s=1.0)
        late = start(barrier, {"w1"}, now=10.0, timeout_s=5.0)
        barrier.acknowledge(early.op_id, "w1")
        assert barrier.next_deadline() == 11.0
        assert barrier.expire(now=10.5) == []
        assert barrier.expire(now=11.0) == [early]
        assert barrier.pending == [late]
        assert barrier.expire(now=11.0) == []
        outcome = early.outcome(now=11.0)
        assert outcome.complete is False
        assert outcome.acked == ["w1"]
        assert outcome.stragglers == ["engine", "w2"]
        assert outcome.elapsed_s == 1.0
        assert outcome.action == "pause"
        assert barrier.next_deadline() == 15.0

    def test_depart_completes_ops_waiting_only_on_the_departed(self) -> None:
        """A departure completes exactly the operations that waited on nobody else."""
        barrier = PauseBarrier()
        only_w1 = start(barrier, {"engine", "w1"})
        also_w2 = start(barrier, {"w1", "w2"})
        barrier.acknowledge(only_w1.op_id, "engine")
        assert barrier.depart("w1") == [only_w1]
        assert barrier.pending == [also_w2]
        assert also_w2.outstanding == {"w2"}
        outcome = only_w1.outcome(now=0.0)
        assert outcome.complete is True
        assert outcome.departed == ["w1"]
        assert outcome.stragglers == []

    def test_depart_of_acked_participant_changes_nothing(self) -> None:
        """A participant that already acknowledged is not recorded as departed."""
        barrier = PauseBarrier()
        op = start(barrier, {"a", "b"})
        barrier.acknowledge(op.op_id, "a")
        assert barrier.depart("a") == []
        assert op.departed == set()

    def test_state_tracks_last_started_op(self) -> None:
        """The pause state is the most recent operation's, with an increasing seq."""
        barrier = PauseBarrier(42)
        assert barrier.state == PauseState()
        pause = barrier.start(is_pause=True, mode="retract", participants={"a"}, timeout_s=1, now=0)
        assert barrier.state == PauseState(paused=True, mode="retract", op_id="42-1", seq=1)
        resume = barrier.start(
            is_pause=False, mode="retract", participants={"a"}, timeout_s=1, now=0
        )
        assert resume.mode is None
        assert resume.seq > pause.seq
        assert barrier.state == PauseState(paused=False, mode=None, op_id="42-2", seq=2)
        barrier.acknowledge(pause.op_id, "a")
        assert barrier.state.op_id == resume.op_id

    def test_restored_state_and_counter(self) -> None:
        """A barrier built from a predecessor's state starts in it and counts on."""
        restored = PauseState(paused=True, mode="in_place", op_id="41-7", seq=7)
        barrier = PauseBarrier(42, first_seq=8, state=restored)
        assert barrier.state == restored
        assert barrier.last_seq == 7
        op = barrier.start(is_pause=False, mode=None, participants={"a"}, timeout_s=1, now=0)
        assert (op.op_id, op.seq, barrier.last_seq) == ("42-8", 8, 8)

    def test_refuses_a_negative_incarnation(self) -> None:
        """Incarnations and sequence numbers are never below their starts."""
        with pytest.raises(ValueError):
            PauseBarrier(-1)
        with pytest.raises(ValueError):
            PauseBarrier(1, first_seq=0)

    def test_outcome_names_the_action(self) -> None:
        """outcome() reports a continue as action ``continue`` without a mode."""
        op = start(PauseBarrier(), {"a"}, is_pause=False)
        outcome = op.outcome(now=0.0)
        assert (outcome.action, outcome.mode) == ("continue", None)

    def test_waiter_is_kept(self) -> None:
        """The opaque waiter given to start() is returned with the completed operation."""
        barrier = PauseBarrier()
        waiter = object()
        op = barrier.start(
            is_pause=True, mode="abort", participants={"a"}, timeout_s=1, now=0, waiter=waiter
        )
        done = barrier.acknowledge(op.op_id, "a")
        assert done is not None and done.waiter is waiter


class BarrierMachine(RuleBasedStateMachine):
    """Any interleaving of start/ack/depart/expire answers every operation exactly once."""

    ops = Bundle("ops")

    def __init__(self) -> None:
        super().__init__()
        self.barrier = PauseBarrier()
        self.now = 0.0
        self.started: dict[str, PauseOperation] = {}
        self.answered: Counter[str] = Counter()

    def _answer(self, done: list[PauseOperation]) -> None:
        for op in done:
            self.answered[op.op_id] += 1

    @rule(
        target=ops,
        participants=st.sets(st.sampled_from(PARTICIPANTS)),
        timeout_s=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
        is_pause=st.booleans(),
    )
    def start_op(self, participants: set[str], timeout_s: float, is_pause: bool) -> str:
        op = self.barrier.start(
            is_pause=is_pause,
            mode="in_place",
            participants=participants,
            timeout_s=timeout_s,
            now=self.now,
        )
        assert op.op_id not in self.started
        self.started[op.op_id] = op
        assert self.barrier.state.op_id == op.op_id
        if op.complete:
            self._answer([op])
        return op.op_id

    @rule(op_id=ops, participant=st.sampled_from((*PARTICIPANTS, "stranger")))
    def acknowledge(self, op_id: str, participant: str) -> None:
        done = self.barrier.acknowledge(op_id, participant)
        if done is not None:
            assert done.op_id == op_id and done.complete
            self._answer([done])

    @rule(participant=st.sampled_from(PARTICIPANTS))
    def depart(self, participant: str) -> None:
        done = self.barrier.depart(participant)
        assert all(op.complete for op in done)
        self._answer(done)

    @rule(step=st.sampled_from([0.0, 0.25, 1.0]))
    def expire(self, step: float) -> None:
        self.now += step
        done = self.barrier.expire(self.now)
        assert all(op.deadline <= self.now for op in done)
        self._answer(done)

    @precondition(lambda self: bool(self.started))
    @rule()
    def finish(self) -> None:
        """Expiring far in the future answers everything left."""
        self.now += 1000.0
        self._answer(self.barrier.expire(self.now))
        assert self.barrier.pending == []
        assert set(self.answered) == set(self.started)

    @invariant()
    def every_op_pending_or_answered_once(self) -> None:
        pending = {op.op_id for op in self.barrier.pending}
        assert all(count == 1 for count in self.answered.values())
        assert pending.isdisjoint(self.answered)
        assert pending | set(self.answered) == set(self.started)


BarrierMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestBarrierInterleavings = BarrierMachine.TestCase
