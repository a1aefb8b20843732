"""What every engine backend's scheduler shares: the waiting queue, admission, aborts and
the bookkeeping of the three pause modes. Pure: no sockets, no clock, no model.

:class:`QueueingScheduler` keeps requests waiting in FIFO order and leaves the running
ones to its subclass (the simulated scheduler keeps them in a dict, the llama.cpp one in
KV sequences), which says what it runs (:meth:`~QueueingScheduler.running_sequences`),
how it lets one go (:meth:`~QueueingScheduler.release`) and whether it takes a request at
all (:meth:`~QueueingScheduler.refusal`). On that it builds, once for every backend:

* admission: a request whose (owner, rid) is in flight is dropped (``duplicates``); one
  arriving while ``max_waiting_requests`` wait, or one the backend refuses, finishes at
  once with the refusal's row; any other waits;
* :meth:`~QueueingScheduler.abort` and :meth:`~QueueingScheduler.abort_all`: abort rows,
  running requests released first;
* pauses: ``abort`` ends every request with an abort row; ``retract`` releases every
  running request and puts them, in order and with their output so far, at the front of
  the queue (``retractions`` counts it), so that their final tokens equal an unpaused
  run's; ``in_place`` keeps everything. No step runs until
  :meth:`~QueueingScheduler.resume`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from router_core.wire.control import LoadSnapshot, PauseMode
from router_core.wire.finish import abort_reason, lost_reason
from switchboard.engine.sequences import Sequence, StepResult, StepRow

__all__ = ["QUEUE_FULL", "QueueingScheduler", "WaitingQueue"]

#: The abort message of a request refused because ``limit`` requests already wait.
QUEUE_FULL = "the engine's waiting queue is full ({limit} waiting); retry later"


class WaitingQueue:
    """The FIFO of requests waiting to run, with the set of their keys kept in step, so
    that whether a request waits is one set lookup (``key in queue``), not a scan."""

    def __init__(self) -> None:
        self._queue: deque[Sequence] = deque()
        self._keys: set[tuple[str, str]] = set()

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Sequence]:
        return iter(self._queue)

    def __getitem__(self, index: int) -> Sequence:
        return self._queue[index]

    def __contains__(self, key: object) -> bool:
        return key in self._keys  # an (owner, rid)

    def append(self, sequence: Sequence) -> None:
        self._queue.append(sequence)
        self._keys.add(sequence.key)

    def popleft(self) -> Sequence:
        sequence = self._queue.popleft()
        self._keys.discard(sequence.key)
        return sequence

    def push_front(self, sequences: list[Sequence]) -> None:
        """Put ``sequences``, in their order, ahead of every waiting request."""
        self._queue.extendleft(reversed(sequences))
        self._keys.update(sequence.key for sequence in sequences)

    def remove_where(self, chosen: Callable[[Sequence], bool]) -> list[Sequence]:
        """Remove the requests ``chosen`` picks, keeping the others' order; the removed."""
        removed = [sequence for sequence in self._queue if chosen(sequence)]
        if removed:
            self._queue = deque(sequence for sequence in self._queue if not chosen(sequence))
            self._keys.difference_update(sequence.key for sequence in removed)
        return removed


class QueueingScheduler(ABC):
    """Waiting queue, admission, aborts and pause state (see the module docstring)."""

    def __init__(self, max_waiting_requests: int) -> None:
        self.max_waiting_requests = max_waiting_requests
        self.waiting = WaitingQueue()
        self.paused: PauseMode | None = None
        self.steps = 0
        self.duplicates = 0
        #: Requests refused (finished with an abort row) because the queue was full.
        self.queue_full = 0
        #: The weights serving: "" for the backend's own, else the last update's version.
        self.weight_version = ""

    def load_weights(self, model: str, version: str) -> str:
        """Serve the weights of ``model`` as ``version``; the version now serving.
        ValueError naming what is wrong leaves the old weights serving. The default
        backend cannot load weights."""
        raise ValueError("this engine cannot load weights")

    def flush_cache(self) -> int:
        """Drop whatever cache this backend keeps; the tokens' worth it held. Only called
        while no request runs unpaused. The default keeps no cache: 0."""
        return 0

    @abstractmethod
    def running_sequences(self) -> list[Sequence]:
        """The running requests, in the order they were admitted."""

    @abstractmethod
    def holds_running(self, key: tuple[str, str]) -> bool:
        """Whether the request ``key`` (owner, rid) is running."""

    @abstractmethod
    def release(self, sequence: Sequence) -> None:
        """Stop running ``sequence`` and free what it holds (it is running)."""

    @abstractmethod
    def next_step_at(self) -> float | None:
        """When the next step is due (monotonic seconds; 0.0: now), None for no step."""

    @abstractmethod
    def step(self, now: float) -> StepResult:
        """Run one step at ``now``: the rows of every request that moved or ended."""

    @abstractmethod
    def load(self) -> LoadSnapshot:
        """The current load, for the engine's load snapshots."""

    def refusal(self, sequence: Sequence) -> dict[str, Any] | None:
        """Why this backend cannot take ``sequence`` at all (a finish reason), or None."""
        return None

    def __contains__(self, key: tuple[str, str]) -> bool:
        return self.holds_running(key) or key in self.waiting

    def admit(self, sequence: Sequence) -> StepResult:
        """Queue ``sequence``; what to send now: nothing when queued, nothing (counted in
        ``duplicates``) if its (owner, rid) is already in flight, its abort row when
        ``max_waiting_requests`` already wait (counted in ``queue_full``) or when the
        backend refuses it."""
        if sequence.key in self:
            self.duplicates += 1
            return StepResult()
        refused = self.refusal(sequence)
        if refused is None and len(self.waiting) >= self.max_waiting_requests:
            self.queue_full += 1
            message = QUEUE_FULL.format(limit=self.max_waiting_requests)
            refused = lost_reason("engine_queue_full", message)
        if refused is not None:
            return StepResult([StepRow(sequence, [], refused)])
        self.waiting.append(sequence)
        return StepResult()

    def abort(self, owner: str, rid: str, message: str = "client") -> StepResult:
        """Finish request ``rid`` of ``owner`` with an abort row (none if it is unknown)."""
        return self._abort_where(lambda seq: seq.key == (owner, rid), message)

    def abort_all(self, owner: str, message: str = "client") -> StepResult:
        """Finish every request of ``owner`` with an abort row."""
        return self._abort_where(lambda seq: seq.owner == owner, message)

    def _abort_where(self, chosen: Callable[[Sequence], bool], message: str) -> StepResult:
        doomed = [seq for seq in self.running_sequences() if chosen(seq)]
        for seq in doomed:
            self.release(seq)
        doomed += self.waiting.remove_where(chosen)
        reason = abort_reason(message)
        return StepResult([StepRow(seq, [], dict(reason)) for seq in doomed])

    def pause(self, mode: PauseMode) -> StepResult:
        """Pause in ``mode``; for ``abort``, the abort rows of every in-flight request."""
        self.paused = mode
        if mode == "abort":
            return self._abort_where(lambda seq: True, "paused")
        if mode == "retract":
            self.retract(self.running_sequences())
        return StepResult()

    def retract(self, sequences: list[Sequence]) -> None:
        """Release running ``sequences`` and queue them first, in order, output kept."""
        for seq in sequences:
            self.release(seq)
            seq.retractions += 1
        self.waiting.push_front(sequences)

    def resume(self) -> None:
        """Leave the pause."""
        self.paused = None
