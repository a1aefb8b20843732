"""The whole stack's throughput and latency over the last minutes, for the console's chart.

Pure. Each time the sampler reads the workers' metrics (:mod:`app.stats_sampler`) it
hands :meth:`StackHistory.observe` every worker's running totals
(:func:`app.worker_stats.worker_totals`) and tokens generated
(:func:`generation_tokens`). Between two reads it makes one
:class:`StackSample`: HTTP requests answered per second (the ``/health`` probes left
out), generated tokens per second, and the p50 and p95 of the end-to-end latency of the
generations that finished in the interval, estimated from the workers' buckets summed
(:func:`app.worker_stats.quantile`). A worker whose totals went down (its metrics
restarted) counts from zero; a worker absent from the newer read adds nothing.

The history is a ring of at most ``capacity`` samples, oldest first, each stamped with
the wall clock (Unix seconds, for the page to show) of the read that ended it; its
memory is bounded whatever the uptime. The first read makes no sample: a rate needs
two.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import Metric
from pydantic import BaseModel, Field

from app.worker_stats import WorkerTotals, quantile

__all__ = [
    "DEFAULT_HISTORY_S",
    "HistoryPage",
    "StackHistory",
    "StackSample",
    "generation_tokens",
]

#: How far back the chart reaches when the page opens.
DEFAULT_HISTORY_S: Final = 15 * 60.0
_TOKENS: Final = "switchboard_generation_tokens_total"


class StackSample(BaseModel):
    """The whole stack over one sampling interval, ending at ``at``."""

    at: float = Field(description="when the interval ended (Unix seconds)")
    interval_s: float = Field(description="seconds the interval lasted")
    requests_per_s: float = Field(
        description="HTTP requests answered (the /health probes left out)"
    )
    tokens_per_s: float = Field(description="tokens the workers generated")
    generations: int = Field(description="generation requests that finished")
    latency_p50_s: float | None = Field(
        description="median end-to-end latency of those generations; null without any"
    )
    latency_p95_s: float | None = Field(description="their 95th percentile, likewise")


class HistoryPage(BaseModel):
    """``GET /api/history``."""

    available: bool = Field(description="whether the workers' metrics are read at all")
    interval_s: float = Field(description="seconds between samples")
    capacity: int = Field(description="the most samples kept (older ones are forgotten)")
    samples: list[StackSample] = Field(description="oldest first")


def generation_tokens(families: Iterable[Metric]) -> dict[str, float]:
    """Each worker's tokens generated so far, by worker id."""
    tokens: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            worker = sample.labels.get("worker")
            if worker is not None and sample.name == _TOKENS:
                tokens[worker] = tokens.get(worker, 0.0) + sample.value
    return tokens


@dataclass(frozen=True)
class _Read:
    """One read of every worker: its totals and its tokens generated."""

    monotonic: float
    totals: Mapping[str, WorkerTotals]
    tokens: Mapping[str, float]


def _rise(after: float, before: float) -> float:
    """How much a counter rose; one that went down restarted, so all of it is new."""
    return after if after < before else after - before


def _interval_sample(before: _Read, after: _Read, at: float) -> StackSample | None:
    """The stack between two reads, stamped ``at``; None if no time passed between them."""
    seconds = after.monotonic - before.monotonic
    if seconds <= 0:
        return None
    requests = generations = tokens = 0.0
    buckets: dict[float, float] = {}
    for worker, now in after.totals.items():
        then = before.totals.get(worker, WorkerTotals())
        if now.requests < then.requests or now.latency_count < then.latency_count:
            then = WorkerTotals()
        requests += now.requests - then.requests
        generations += now.latency_count - then.latency_count
        earlier = dict(then.buckets)
        for bound, count in now.buckets:
            buckets[bound] = buckets.get(bound, 0.0) + max(0.0, count - earlier.get(bound, 0.0))
    for worker, count in after.tokens.items():
        tokens += _rise(count, before.tokens.get(worker, 0.0))
    summed = tuple(sorted(buckets.items()))
    return StackSample(
        at=at,
        interval_s=seconds,
        requests_per_s=requests / seconds,
        tokens_per_s=tokens / seconds,
        generations=round(generations),
        latency_p50_s=quantile(0.5, summed),
        latency_p95_s=quantile(0.95, summed),
    )


class StackHistory:
    """The latest ``capacity`` :class:`StackSample`, one per read after the first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a history keeps at least one sample")
        self.capacity = capacity
        self._samples: deque[StackSample] = deque(maxlen=capacity)
        self._last: _Read | None = None

    def observe(
        self,
        monotonic: float,
        at: float,
        totals: Mapping[str, WorkerTotals],
        tokens: Mapping[str, float],
    ) -> StackSample | None:
        """Add the read taken at ``monotonic`` (wall clock ``at``); the sample it ends, if
        any (the oldest one leaves once ``capacity`` are kept)."""
        read = _Read(monotonic, dict(totals), dict(tokens))
        last, self._last = self._last, read
        if last is None:
            return None
        sample = _interval_sample(last, read, at)
        if sample is not None:
            self._samples.append(sample)
        return sample

    def samples(self, after: float | None = None) -> list[StackSample]:
        """The samples kept, oldest first; with ``after``, only those stamped later."""
        if after is None:
            return list(self._samples)
        return [sample for sample in self._samples if sample.at > after]
