"""The built-in engine's scheduler: continuous batching, simulated. Pure: no sockets, no clock.

Requests wait in a FIFO queue. Each :meth:`Scheduler.step` first charges one decode
token per running request against the step's token budget (``max_tokens_per_step``),
then admits waiting requests in order while the running batch is below
``max_running_requests`` and the budget still covers the request's prefill (its prompt
length, plus the tokens it had already generated if it was retracted). The head of the
queue that does not fit blocks the ones behind it; a head larger than the whole budget
is admitted alone into an empty batch, so that it never starves. Every running request,
newly admitted ones included, then gets one new token by the token rule of
:mod:`switchboard.engine.tokens`; an embedding request is answered in the step that
admits it and leaves the batch.

A request admitted while ``max_waiting_requests`` wait finishes at once with an abort
row (:data:`QUEUE_FULL`), counted in ``queue_full``; a retract may put the running batch
back on a full queue, so at most ``max_waiting_requests + max_running_requests`` wait.

A request finishes (finish reasons in SGLang's shape) with, checked in this order:
``{"type": "length", "length": max_new_tokens}`` once it has that many tokens;
``{"type": "stop", "matched": token_id}`` when the new token is one of its
``stop_token_ids`` or EOS (unless ``ignore_eos``); ``{"type": "stop", "matched": s}``
when stop string ``s`` appears in the decoded tail of its output (only with a ``decode``
function); stop conditions wait for ``min_new_tokens``. :meth:`Scheduler.abort`,
:meth:`Scheduler.abort_all` and an abort-mode pause finish requests at once with
``{"type": "abort", "message": ...}``, returned as a :class:`StepResult` to send now.

Pause modes (``docs/engine.md``): ``abort`` finishes every waiting and running request
with an abort row; ``retract`` moves the running batch, in order, back to the front of
the waiting queue, keeping the tokens generated so far (so the final tokens equal an
unpaused run's); ``in_place`` keeps everything. In every mode no step runs until
:meth:`Scheduler.resume`; requests admitted meanwhile wait.

Timing is simulated: a step with ``n`` tokens takes ``step_time_s + per_token_cost_s *
n``; :meth:`Scheduler.next_step_at` says when the next step is due.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from router_core.settings_fields import flagged
from router_core.wire.control import LoadSnapshot, PauseMode
from router_core.wire.finish import abort_reason, length_reason, lost_reason, stop_reason
from switchboard.engine.tokens import embedding_for, generated_token

__all__ = [
    "QUEUE_FULL",
    "FinishReason",
    "Scheduler",
    "SchedulerConfig",
    "Sequence",
    "StepResult",
    "StepRow",
    "WaitingQueue",
]

#: A finish reason as it travels (:mod:`router_core.wire.finish` writes its shapes).
FinishReason = dict[str, Any]
#: Decoded tail tokens checked for stop strings, beyond the longest stop string's length.
STOP_TAIL_SLACK = 4
#: The abort message of a request refused because ``limit`` requests already wait.
QUEUE_FULL = "the engine's waiting queue is full ({limit} waiting); retry later"


@dataclass(frozen=True)
class SchedulerConfig:
    """Limits, the simulated cost of a step, and the token and embedding rules' inputs."""

    token_pool: tuple[int, ...]
    # Flagged fields are ``switchboard engine`` flags (router_core.settings_fields), and
    # ``switchboard up`` takes its defaults for them from here.
    max_running_requests: int = flagged(256, help="running requests at most", bound="positive")
    max_waiting_requests: int = flagged(
        65_536,
        help="requests waiting to run at most; beyond, a request is aborted at once",
        bound="positive",
    )
    max_tokens_per_step: int = flagged(
        8192,
        help="a step's token budget: one per running request plus each admitted prompt",
        bound="positive",
    )
    step_time_s: float = flagged(
        0.005, help="seconds a step takes", aliases=("--step-time",), bound="non_negative"
    )
    per_token_cost_s: float = flagged(
        0.0,
        help="extra seconds a step takes per token in it",
        aliases=("--per-token-cost",),
        bound="non_negative",
    )
    vocab_seed: int = flagged(0, help="the seed of the token rule")
    eos_token_id: int | None = None
    embedding_dimension: int = 64

    def __post_init__(self) -> None:
        if not self.token_pool:
            raise ValueError("token_pool must not be empty")
        limits = (self.max_running_requests, self.max_waiting_requests, self.max_tokens_per_step)
        if min(limits) <= 0:
            raise ValueError(
                "max_running_requests, max_waiting_requests and max_tokens_per_step must be > 0"
            )
        if self.step_time_s < 0 or self.per_token_cost_s < 0:
            raise ValueError("step_time_s and per_token_cost_s must be >= 0")


@dataclass
class Sequence:
    """One request in the scheduler: who asked, what, and what it has generated."""

    rid: str
    owner: str
    prompt: list[int]
    max_new_tokens: int = 128
    min_new_tokens: int = 0
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    ignore_eos: bool = False
    embedding: bool = False
    output_ids: list[int] = field(default_factory=list)
    retractions: int = 0
    #: Anything the caller wants back with each row (the engine keeps output options).
    context: Any = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.owner, self.rid)

    @property
    def prefill_tokens(self) -> int:
        """Tokens to (re)process on admission: the prompt plus any output kept on retract."""
        return max(1, len(self.prompt) + len(self.output_ids))


@dataclass(frozen=True)
class StepRow:
    """One request's share of a step: its new token ids and, if it ended, why."""

    sequence: Sequence
    new_ids: list[int]
    finished: FinishReason | None = None
    embedding: list[float] | None = None


@dataclass(frozen=True)
class StepResult:
    """What one step (or an abort) produced, in batch order."""

    rows: list[StepRow] = field(default_factory=list)
    #: Step number (0 when nothing was stepped), prefill and decode tokens processed.
    step: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens


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


class Scheduler:
    """Waiting queue, running batch and pause state of the simulated engine."""

    def __init__(
        self, config: SchedulerConfig, decode: Callable[[list[int]], str] | None = None
    ) -> None:
        """``decode`` turns output ids into text for stop strings; without it they are ignored."""
        self.config = config
        self.decode = decode
        self.waiting = WaitingQueue()
        self.running: dict[tuple[str, str], Sequence] = {}
        self.paused: PauseMode | None = None
        self.steps = 0
        self.last_step_tokens = 0
        self.duplicates = 0
        #: Requests refused (finished with an abort row) because the queue was full.
        self.queue_full = 0
        self._next_step_at = 0.0

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self.running or key in self.waiting

    def admit(self, sequence: Sequence) -> StepResult:
        """Queue ``sequence``; what to send now: nothing when queued, nothing (counted in
        ``duplicates``) if its (owner, rid) is already in flight, its abort row (counted
        in ``queue_full``) when ``max_waiting_requests`` already wait."""
        if sequence.key in self:
            self.duplicates += 1
            return StepResult()
        limit = self.config.max_waiting_requests
        if len(self.waiting) >= limit:
            self.queue_full += 1
            full = lost_reason("engine_queue_full", QUEUE_FULL.format(limit=limit))
            return StepResult([StepRow(sequence, [], full)])
        self.waiting.append(sequence)
        return StepResult()

    def abort(self, owner: str, rid: str, message: str = "client") -> StepResult:
        """Finish request ``rid`` of ``owner`` with an abort row (none if it is unknown)."""
        return self._abort_where(lambda seq: seq.key == (owner, rid), message)

    def abort_all(self, owner: str, message: str = "client") -> StepResult:
        """Finish every request of ``owner`` with an abort row."""
        return self._abort_where(lambda seq: seq.owner == owner, message)

    def _abort_where(self, chosen: Callable[[Sequence], bool], message: str) -> StepResult:
        doomed = [seq for seq in self.running.values() if chosen(seq)]
        for seq in doomed:
            del self.running[seq.key]
        doomed += self.waiting.remove_where(chosen)
        reason = abort_reason(message)
        return StepResult([StepRow(seq, [], dict(reason)) for seq in doomed])

    def pause(self, mode: PauseMode) -> StepResult:
        """Pause in ``mode``; for ``abort``, the abort rows of every in-flight request."""
        self.paused = mode
        if mode == "abort":
            return self._abort_where(lambda seq: True, "paused")
        if mode == "retract":
            retracted = list(self.running.values())
            for seq in retracted:
                seq.retractions += 1
            self.running.clear()
            self.waiting.push_front(retracted)
        return StepResult()

    def resume(self) -> None:
        """Leave the pause; the next step is due at once."""
        self.paused = None
        self._next_step_at = 0.0

    def next_step_at(self) -> float | None:
        """When the next step is due, or None while paused or with nothing to do."""
        if self.paused is not None or not (self.running or self.waiting):
            return None
        return self._next_step_at

    def step(self, now: float) -> StepResult:
        """Run one step at time ``now`` (a no-op while paused)."""
        if self.paused is not None or not (self.running or self.waiting):
            return StepResult()
        decode_tokens = len(self.running)
        budget = self.config.max_tokens_per_step - decode_tokens
        admitted, prefill_tokens = self._admit_waiting(budget)
        self.steps += 1
        rows = [self._advance(seq) for seq in self.running.values()]
        rows += [self._advance(seq) for seq in admitted]
        for seq in admitted:
            if not seq.embedding:
                self.running[seq.key] = seq
        for row in rows:
            if row.finished is not None:
                self.running.pop(row.sequence.key, None)
        tokens = prefill_tokens + decode_tokens
        self.last_step_tokens = tokens
        cost = self.config.step_time_s + self.config.per_token_cost_s * tokens
        self._next_step_at = now + cost
        return StepResult(rows, self.steps, prefill_tokens, decode_tokens)

    def _admit_waiting(self, budget: int) -> tuple[list[Sequence], int]:
        admitted: list[Sequence] = []
        spent = 0
        while self.waiting and len(self.running) + len(admitted) < self.config.max_running_requests:
            cost = self.waiting[0].prefill_tokens
            alone = not self.running and not admitted
            if spent + cost > budget and not alone:
                break
            admitted.append(self.waiting.popleft())
            spent += cost
        return admitted, spent

    def _advance(self, seq: Sequence) -> StepRow:
        if seq.embedding:
            vector = embedding_for(
                seq.prompt, self.config.embedding_dimension, self.config.vocab_seed
            )
            return StepRow(seq, [], stop_reason(None), vector)
        index = len(seq.output_ids)
        token = generated_token(self.config.token_pool, seq.prompt, index, self.config.vocab_seed)
        seq.output_ids.append(token)
        return StepRow(seq, [token], self._finish_reason(seq))

    def _finish_reason(self, seq: Sequence) -> FinishReason | None:
        count = len(seq.output_ids)
        if count >= seq.max_new_tokens:
            return length_reason(seq.max_new_tokens)
        if count < seq.min_new_tokens:
            return None
        token = seq.output_ids[-1]
        eos = token == self.config.eos_token_id and not seq.ignore_eos
        if token in seq.stop_token_ids or eos:
            return stop_reason(token)
        if seq.stop and self.decode is not None:
            window = max(len(text) for text in seq.stop) + STOP_TAIL_SLACK
            tail = self.decode(seq.output_ids[-window:])
            for text in seq.stop:
                if text in tail:
                    return stop_reason(text)
        return None

    def load(self) -> LoadSnapshot:
        """The current load; ``token_usage`` is the share of the step budget the last step used."""
        return LoadSnapshot(
            running=len(self.running),
            waiting=len(self.waiting),
            max_running=self.config.max_running_requests,
            token_usage=min(1.0, self.last_step_tokens / self.config.max_tokens_per_step),
            step=self.steps,
        )
