"""Fixed-bucket histograms kept by routing loops, and the bucket bounds every process shares.

A routing loop observes plain floats into a :class:`Histogram` (a bisect and two integer
additions, no lock: one loop thread owns it); the admin app reads a snapshot over the
control socket at scrape time and turns it into a Prometheus histogram. Processes that
export through ``prometheus_client`` use the same bounds, so a metric family observed in
several processes (``switchboard_hop_latency_seconds``) merges bucket by bucket.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "BARRIER_BUCKETS",
    "E2E_BUCKETS",
    "HOP_BUCKETS",
    "HTTP_BUCKETS",
    "ITL_BUCKETS",
    "SPLIT_ROW_BUCKETS",
    "TTFT_BUCKETS",
    "Histogram",
    "HistogramSet",
]

#: Seconds from a message's ``sent_ns`` to its receipt by the next process.
HOP_BUCKETS: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
)  # fmt: skip
#: Rows per batch message a router splits.
SPLIT_ROW_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)
#: Seconds from broadcasting a pause/continue to answering it.
BARRIER_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Time to first token, seconds.
TTFT_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
#: Gap between consecutive streamed chunks, per token, seconds.
ITL_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
#: Whole generation request, seconds.
E2E_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: HTTP request handling, seconds.
HTTP_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class Histogram:
    """Counts of observations at or below each upper bound, plus their sum."""

    __slots__ = ("_counts", "bounds", "count", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)) or not bounds:
            raise ValueError("bounds must be non-empty, strictly increasing")
        self.bounds = tuple(bounds)
        # One slot per bound plus the +Inf slot; counts are per bucket, not cumulative.
        self._counts = [0] * (len(self.bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """Record ``value`` ``times`` times."""
        self._counts[bisect_left(self.bounds, value)] += times
        self.count += times
        self.sum += value * times

    def merge(self, per_bucket: Sequence[int], total: float) -> None:
        """Add counts observed elsewhere: one per bound plus ``+Inf``, and their sum."""
        if len(per_bucket) != len(self._counts):
            raise ValueError(f"need {len(self._counts)} bucket counts, got {len(per_bucket)}")
        for slot, count in enumerate(per_bucket):
            self._counts[slot] += count
            self.count += count
        self.sum += total

    def take(self) -> tuple[list[int], float]:
        """The per-bucket counts (``+Inf`` last, not cumulative) and the sum since the
        last take, leaving the histogram empty: for writing observations out in bulk."""
        counts, total = self._counts, self.sum
        self._counts, self.count, self.sum = [0] * len(counts), 0, 0.0
        return counts, total

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` pairs, ending with ``+Inf``."""
        pairs: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self._counts, strict=True):
            running += count
            pairs.append((bound, running))
        return pairs

    def snapshot(self) -> dict[str, Any]:
        """A plain mapping for the control socket (``+Inf`` is spelt as the string)."""
        return {
            "buckets": [["+Inf" if b == float("inf") else b, n] for b, n in self.cumulative()],
            "sum": self.sum,
            "count": self.count,
        }


class HistogramSet:
    """Histograms of one metric, one per label value, created on first observation."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._series: dict[str, Histogram] = {}

    def observe(self, label: str, value: float, times: int = 1) -> None:
        """Record ``value`` under ``label``."""
        series = self._series.get(label)
        if series is None:
            series = self._series[label] = Histogram(self.bounds)
        series.observe(value, times)

    def merge(self, label: str, per_bucket: Sequence[int], total: float) -> None:
        """Add per-bucket counts observed elsewhere under ``label`` (see Histogram.merge)."""
        if not any(per_bucket):
            return
        series = self._series.get(label)
        if series is None:
            series = self._series[label] = Histogram(self.bounds)
        series.merge(per_bucket, total)

    def get(self, label: str) -> Histogram | None:
        """The histogram for ``label``, or None if nothing was observed under it."""
        return self._series.get(label)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{label: Histogram.snapshot()}``."""
        return {label: series.snapshot() for label, series in sorted(self._series.items())}
