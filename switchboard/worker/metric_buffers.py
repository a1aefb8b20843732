"""Per-token and per-message observations kept in plain Python, written out in bulk.

A ``prometheus_client`` value in multiprocess mode costs a lock and a write into a
memory-mapped file (2-4 µs per observation here). Inter-token latency is observed for
every generated token and the backward hop for every output message, so the worker
keeps those in these buffers (a bisect and two additions each) and its lifespan writes
them out every :data:`FLUSH_INTERVAL_S`, at most a second before a scrape could read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from router_core.histogram import Histogram as PendingHistogram

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

__all__ = ["FLUSH_INTERVAL_S", "CounterBuffer", "HistogramBuffer", "add_to_histogram"]

#: How often a worker writes its buffered observations out.
FLUSH_INTERVAL_S: Final = 1.0


def add_to_histogram(child: Histogram, per_bucket: Sequence[int], total: float) -> None:
    """Add counts observed elsewhere to a labelled histogram: one count per bucket bound
    plus ``+Inf`` (not cumulative), and their sum.

    prometheus_client has no public call for this; its histogram children keep one value
    per bucket and one for the sum, which this adds to directly (a unit test checks that
    the result equals observing one by one, so a prometheus_client that keeps them
    otherwise fails the suite rather than miscounting). TypeError if they are not there.
    """
    buckets = getattr(child, "_buckets", None)
    total_value = getattr(child, "_sum", None)
    if buckets is None or total_value is None or len(buckets) != len(per_bucket):
        raise TypeError("this prometheus_client keeps histogram values differently")
    for value, count in zip(buckets, per_bucket, strict=True):
        if count:
            value.inc(count)
    total_value.inc(total)


class HistogramBuffer:
    """Observations of one labelled histogram since the last :meth:`flush`, kept in a
    :class:`~router_core.histogram.Histogram` with the same bounds."""

    __slots__ = ("_child", "_pending")

    def __init__(self, child: Histogram, bounds: Sequence[float]) -> None:
        self._child = child
        self._pending = PendingHistogram(bounds)

    def observe(self, value: float, times: int = 1) -> None:
        """Record ``value`` ``times`` times (``le`` semantics: a bound is inclusive)."""
        self._pending.observe(value, times)

    def flush(self) -> None:
        """Write what was recorded into the histogram and start again."""
        if not self._pending.count:
            return
        counts, total = self._pending.take()
        add_to_histogram(self._child, counts, total)


class CounterBuffer:
    """Increments of one labelled counter since the last :meth:`flush`."""

    __slots__ = ("_child", "_pending")

    def __init__(self, child: Counter) -> None:
        self._child = child
        self._pending = 0

    def inc(self, amount: int = 1) -> None:
        """Add ``amount``."""
        self._pending += amount

    def flush(self) -> None:
        """Write the pending increments into the counter and start again."""
        if self._pending:
            pending, self._pending = self._pending, 0
            self._child.inc(pending)
