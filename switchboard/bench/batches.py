"""Realistic decode-step output batches, and which worker owns each row.

A batch holds what a detokenizer emits for one decode step: a few new tokens of text
and ids per request, the usual per-request counters, stage timestamps, an occasional
finish reason and, in the logprobs variant, per-token logprobs with the top five.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

from router_core.wire.outputs import BatchStrOutput

__all__ = ["DISTINCT_BATCHES", "SplitPlan", "decode_step_batch"]

#: How many distinct batches a producer cycles through (a multiple of any worker count
#: up to 8, so that even one-row batches spread evenly).
DISTINCT_BATCHES: Final = 8

_WORDS: Final = (" the", " model", " answer", " is", ",", " and", " token", " of", " a", ".")
_STAGES: Final = (
    "created",
    "tokenized",
    "queued",
    "scheduled",
    "prefill_finished",
    "last_decode",
)
_TOP_K: Final = 5


@dataclass(frozen=True)
class SplitPlan:
    """``batches`` batches of ``batch_size`` rows, rows owned round-robin by ``workers``."""

    batch_size: int
    batches: int
    workers: tuple[str, ...]
    logprobs: bool = False

    @property
    def requests(self) -> int:
        """Rows sent in total."""
        return self.batch_size * self.batches

    def owner(self, distinct: int, row: int) -> str:
        """The worker owning ``row`` of distinct batch ``distinct``."""
        return self.workers[(distinct * self.batch_size + row) % len(self.workers)]

    def expected_rows(self) -> dict[str, int]:
        """How many rows each worker receives over the whole run."""
        counts = dict.fromkeys(self.workers, 0)
        for sent in range(self.batches):
            distinct = sent % DISTINCT_BATCHES
            for row in range(self.batch_size):
                counts[self.owner(distinct, row)] += 1
        return counts

    def build(self) -> list[BatchStrOutput]:
        """The distinct batches a producer cycles through."""
        # Seeded so every run and both designs see the same content; not for security.
        rng = random.Random(20240601)  # noqa: S311
        return [
            decode_step_batch(self, distinct, rng)
            for distinct in range(min(DISTINCT_BATCHES, self.batches))
        ]


def decode_step_batch(plan: SplitPlan, distinct: int, rng: random.Random) -> BatchStrOutput:
    """One decode step's column-shaped output for ``plan.batch_size`` requests."""
    size = plan.batch_size
    new_tokens = [rng.randint(1, 4) for _ in range(size)]
    output_ids = [[rng.randrange(151_000) for _ in range(n)] for n in new_tokens]
    started = 1_717_200_000.0 + distinct
    columns: dict[str, Any] = {
        "rids": [f"req-{distinct:02d}-{row:04d}-{rng.getrandbits(48):012x}" for row in range(size)],
        "http_worker_ipcs": [plan.owner(distinct, row) for row in range(size)],
        "finished_reasons": [
            {"type": "length", "length": 256} if rng.random() < 1 / 16 else None
            for _ in range(size)
        ],
        "prompt_tokens": [rng.randint(20, 2000) for _ in range(size)],
        "cached_tokens": [rng.choice((0, 0, 16, 128, 512)) for _ in range(size)],
        "spec_verify_ct": [0] * size,
        "time_stats": [
            {stage: started + step * 0.013 for step, stage in enumerate(_STAGES)}
            for _ in range(size)
        ],
        "output_ids": output_ids,
        "completion_tokens": [rng.randint(1, 256) for _ in range(size)],
        "reasoning_tokens": [0] * size,
        "retraction_counts": [0] * size,
        "output_strs": ["".join(rng.choice(_WORDS) for _ in range(n)) for n in new_tokens],
    }
    if plan.logprobs:
        columns["output_token_logprobs_val"] = [
            [-rng.random() * 3 for _ in ids] for ids in output_ids
        ]
        columns["output_token_logprobs_idx"] = output_ids
        columns["output_top_logprobs_val"] = [
            [sorted((-rng.random() * 5 for _ in range(_TOP_K)), reverse=True) for _ in ids]
            for ids in output_ids
        ]
        columns["output_top_logprobs_idx"] = [
            [[rng.randrange(151_000) for _ in range(_TOP_K)] for _ in ids] for ids in output_ids
        ]
    return BatchStrOutput(**columns)
