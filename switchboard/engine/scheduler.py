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

A request finishes by the stop rules of :mod:`switchboard.engine.stopping` (length, stop
token ids or EOS unless ``ignore_eos``, stop strings with a ``decode`` function).
:meth:`Scheduler.abort`, :meth:`Scheduler.abort_all` and an abort-mode pause finish
requests at once with ``{"type": "abort", "message": ...}``, returned as a
:class:`StepResult` to send now.

Pause modes (``docs/engine.md``): ``abort`` finishes every waiting and running request
with an abort row; ``retract`` moves the running batch, in order, back to the front of
the waiting queue, keeping the tokens generated so far (so the final tokens equal an
unpaused run's); ``in_place`` keeps everything. In every mode no step runs until
:meth:`Scheduler.resume`; requests admitted meanwhile wait.

Timing is simulated: a step with ``n`` tokens takes ``step_time_s + per_token_cost_s *
n``; :meth:`Scheduler.next_step_at` says when the next step is due.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from router_core.settings_fields import flagged
from router_core.wire.control import LoadSnapshot
from router_core.wire.finish import stop_reason
from switchboard.engine.queueing import QUEUE_FULL, QueueingScheduler, WaitingQueue
from switchboard.engine.sequences import FinishReason, Sequence, StepResult, StepRow
from switchboard.engine.stopping import finish_reason
from switchboard.engine.tokens import embedding_for, generated_token, version_seed

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
    weight_load_s: float = flagged(
        0.0,
        help="seconds a weight update's load takes (the simulation loads nothing)",
        bound="non_negative",
    )
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


class Scheduler(QueueingScheduler):
    """Waiting queue, running batch and pause state of the simulated engine."""

    def __init__(
        self, config: SchedulerConfig, decode: Callable[[list[int]], str] | None = None
    ) -> None:
        """``decode`` turns output ids into text for stop strings; without it they are ignored."""
        super().__init__(config.max_waiting_requests)
        self.config = config
        self.decode = decode
        self.running: dict[tuple[str, str], Sequence] = {}
        self.last_step_tokens = 0
        self._next_step_at = 0.0
        #: The token rule's seed: the configured one, moved by each weight version.
        self.seed = config.vocab_seed

    def load_weights(self, model: str, version: str) -> str:
        """Serve ``version``: the token rule's seed becomes :func:`version_seed` of it (so
        a test predicts each version's text); ``model``, when given, must be a readable
        file (nothing is read from it). Its version: ``version``, else the file's name.
        ValueError naming what is wrong."""
        if model:
            path = Path(model)
            if not path.is_file() or not os.access(path, os.R_OK):
                raise ValueError(f"{model}: no readable file there")
        chosen = version or Path(model).name
        if not chosen:
            raise ValueError("give a version, or a model file to take it from")
        if self.config.weight_load_s:
            time.sleep(self.config.weight_load_s)  # a load is slow; generation is paused
        self.seed = version_seed(self.config.vocab_seed, chosen)
        self.weight_version = chosen
        return chosen

    def running_sequences(self) -> list[Sequence]:
        return list(self.running.values())

    def holds_running(self, key: tuple[str, str]) -> bool:
        return key in self.running

    def release(self, sequence: Sequence) -> None:
        del self.running[sequence.key]

    def resume(self) -> None:
        """Leave the pause; the next step is due at once."""
        super().resume()
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
        token = generated_token(self.config.token_pool, seq.prompt, index, self.seed)
        seq.output_ids.append(token)
        return StepRow(seq, [token], self._finish_reason(seq))

    def _finish_reason(self, seq: Sequence) -> FinishReason | None:
        end = frozenset() if self.config.eos_token_id is None else {self.config.eos_token_id}
        return finish_reason(
            seq.output_ids,
            max_new_tokens=seq.max_new_tokens,
            min_new_tokens=seq.min_new_tokens,
            stop_token_ids=seq.stop_token_ids,
            end_token_ids=frozenset(end),
            ignore_eos=seq.ignore_eos,
            stop=seq.stop,
            decode=self.decode,
        )

    def load(self) -> LoadSnapshot:
        """The current load; ``token_usage`` is the share of the step budget the last step used."""
        return LoadSnapshot(
            running=len(self.running),
            waiting=len(self.waiting),
            max_running=self.config.max_running_requests,
            token_usage=min(1.0, self.last_step_tokens / self.config.max_tokens_per_step),
            step=self.steps,
        )
