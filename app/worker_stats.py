"""Each worker's errors and latency over a recent window, from the metrics it already writes.

Pure. :func:`worker_totals` reads, from the families of the workers' multiprocess files
(``docs/metrics.md``), each worker's running totals: HTTP requests answered (the
supervisor's ``/health`` probes left out: a draining worker answers them 503 by design),
how many of them were 5xx (``errors``) and 4xx (``refused``), and its
``switchboard_e2e_request_latency_seconds`` histogram (generation requests, arrival to
last token). :class:`StatsWindow` keeps timed samples of those totals and answers the
difference between the newest and the one about ``window_s`` older
(:func:`stats_between`): counts in the window, the error ratio, and the latency's mean
and its p50 and p95 estimated from the buckets as Prometheus's ``histogram_quantile``
does (linear within a bucket; in the ``+Inf`` bucket, the highest finite bound). Before
a sample that old exists, the window is what the samples cover; with one sample, the
workers' whole life (``covered_s`` None).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.core import Metric
from pydantic import BaseModel, Field

__all__ = [
    "PROBE_HANDLERS",
    "StatsWindow",
    "WorkerStats",
    "WorkerStatsPage",
    "WorkerTotals",
    "quantile",
    "stats_between",
    "worker_totals",
]

#: Handlers whose requests are probes, not serving traffic.
PROBE_HANDLERS: Final = frozenset({"/health"})
_REQUESTS: Final = "switchboard_http_requests_total"
_LATENCY: Final = "switchboard_e2e_request_latency_seconds"

Buckets = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class WorkerTotals:
    """One worker's running totals: requests (probes left out), 5xx and 4xx answers,
    and its end-to-end latency histogram (cumulative ``(le, count)``, sum, count)."""

    requests: float = 0.0
    errors: float = 0.0
    refused: float = 0.0
    buckets: Buckets = ()
    latency_sum: float = 0.0
    latency_count: float = 0.0


@dataclass
class _Tally:
    requests: float = 0.0
    errors: float = 0.0
    refused: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)
    latency_sum: float = 0.0
    latency_count: float = 0.0

    def totals(self) -> WorkerTotals:
        return WorkerTotals(
            requests=self.requests,
            errors=self.errors,
            refused=self.refused,
            buckets=tuple(sorted(self.buckets.items())),
            latency_sum=self.latency_sum,
            latency_count=self.latency_count,
        )


def _status_class(status: str) -> int:
    try:
        return int(status) // 100
    except ValueError:
        return 0


def worker_totals(families: Iterable[Metric]) -> dict[str, WorkerTotals]:
    """Each worker's totals, by worker id, from the workers' families."""
    tallies: dict[str, _Tally] = {}
    for family in families:
        for sample in family.samples:
            worker = sample.labels.get("worker")
            if worker is None:
                continue
            if sample.name == _REQUESTS:
                if sample.labels.get("handler") in PROBE_HANDLERS:
                    continue
                tally = tallies.setdefault(worker, _Tally())
                tally.requests += sample.value
                kind = _status_class(sample.labels.get("status", ""))
                if kind == 5:
                    tally.errors += sample.value
                elif kind == 4:
                    tally.refused += sample.value
            elif sample.name == f"{_LATENCY}_bucket":
                bound = float(sample.labels.get("le", "nan"))
                if not math.isnan(bound):
                    buckets = tallies.setdefault(worker, _Tally()).buckets
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name == f"{_LATENCY}_sum":
                tallies.setdefault(worker, _Tally()).latency_sum += sample.value
            elif sample.name == f"{_LATENCY}_count":
                tallies.setdefault(worker, _Tally()).latency_count += sample.value
    return {worker: tally.totals() for worker, tally in sorted(tallies.items())}


def quantile(q: float, buckets: Buckets) -> float | None:
    """The ``q`` quantile (0..1) of cumulative ``buckets`` (sorted by bound, the last
    ``+Inf``), as ``histogram_quantile`` estimates it; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank and count > below:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = (lower if math.isinf(bound) else bound), count
    return lower


class WorkerStats(BaseModel):
    """One worker over the window."""

    requests: int = Field(description="HTTP requests answered (the /health probes left out)")
    errors: int = Field(description="of those, answered 5xx")
    refused: int = Field(description="of those, answered 4xx")
    error_ratio: float | None = Field(description="errors / requests; null without requests")
    generations: int = Field(description="generation requests that finished")
    latency_mean_s: float | None = Field(description="their mean end-to-end latency")
    latency_p50_s: float | None = Field(description="its median, estimated from the buckets")
    latency_p95_s: float | None = Field(description="its 95th percentile, likewise")


class WorkerStatsPage(BaseModel):
    """``GET /api/worker_stats``."""

    available: bool = Field(description="whether the workers' metrics are read at all")
    window_s: float = Field(description="the window asked for")
    covered_s: float | None = Field(
        description="seconds the figures cover (under window_s while the app has sampled for "
        "less); null: the workers' whole life (one sample so far)"
    )
    workers: dict[str, WorkerStats] = Field(description="by worker id")


def _delta(after: float, before: float) -> float:
    return max(0.0, after - before)


def _bucket_delta(after: Buckets, before: Buckets) -> Buckets:
    earlier = dict(before)
    return tuple((bound, _delta(count, earlier.get(bound, 0.0))) for bound, count in after)


def stats_between(before: WorkerTotals | None, after: WorkerTotals) -> WorkerStats:
    """What happened between two samples of one worker's totals (``before`` None: since
    it started). A total that went down (its metrics restarted) counts from zero."""
    base = before or WorkerTotals()
    if after.requests < base.requests or after.latency_count < base.latency_count:
        base = WorkerTotals()
    requests = _delta(after.requests, base.requests)
    errors = _delta(after.errors, base.errors)
    count = _delta(after.latency_count, base.latency_count)
    buckets = _bucket_delta(after.buckets, base.buckets)
    return WorkerStats(
        requests=round(requests),
        errors=round(errors),
        refused=round(_delta(after.refused, base.refused)),
        error_ratio=errors / requests if requests > 0 else None,
        generations=round(count),
        latency_mean_s=_delta(after.latency_sum, base.latency_sum) / count if count > 0 else None,
        latency_p50_s=quantile(0.5, buckets),
        latency_p95_s=quantile(0.95, buckets),
    )


@dataclass(frozen=True)
class _Sample:
    at: float
    totals: Mapping[str, WorkerTotals]


class StatsWindow:
    """Timed samples of every worker's totals, the oldest kept about ``window_s`` back."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("a window is longer than 0 s")
        self.window_s = window_s
        self._samples: deque[_Sample] = deque()

    def observe(self, at: float, totals: Mapping[str, WorkerTotals]) -> None:
        """Add the totals read at monotonic time ``at``; forget samples the window no
        longer needs (it keeps the newest one at least ``window_s`` old)."""
        self._samples.append(_Sample(at, dict(totals)))
        while len(self._samples) >= 2 and self._samples[1].at <= at - self.window_s:
            self._samples.popleft()

    def page(self) -> WorkerStatsPage:
        """Each worker's stats between the oldest sample kept and the newest."""
        if not self._samples:
            return WorkerStatsPage(
                available=True, window_s=self.window_s, covered_s=0.0, workers={}
            )
        newest, oldest = self._samples[-1], self._samples[0]
        single = newest is oldest
        workers = {
            worker: stats_between(None if single else oldest.totals.get(worker), totals)
            for worker, totals in newest.totals.items()
        }
        covered = None if single else newest.at - oldest.at
        return WorkerStatsPage(
            available=True, window_s=self.window_s, covered_s=covered, workers=workers
        )
