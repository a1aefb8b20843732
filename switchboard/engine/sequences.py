"""The units every engine backend schedules and reports: sequences, step rows, results.

A :class:`Sequence` is one request as a scheduler holds it; a :class:`StepRow` one
request's share of a step (its new ids, why it ended, its embedding or log
probabilities); a :class:`StepResult` what one step or abort produced, in batch order.
Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from router_core.wire.requests import SamplingParams

__all__ = ["FinishReason", "Sequence", "StepResult", "StepRow"]

#: A finish reason as it travels (:mod:`router_core.wire.finish` writes its shapes).
FinishReason = dict[str, Any]


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
    #: How to sample (a backend that samples for real reads it; the simulation does not).
    sampling: SamplingParams | None = None
    #: Top log probabilities to return per output token: None for none, 0 for only the
    #: chosen token's.
    logprobs: int | None = None
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
    #: Per new id, when the request asked for logprobs: (logprob, top ids, top logprobs).
    logprobs: list[tuple[float, tuple[int, ...], tuple[float, ...]]] | None = None


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
