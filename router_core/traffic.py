"""What a routing loop moved, per route and peer, and how long messages took to reach it.

A :class:`TrafficStats` lives in one loop thread (no lock) and is read by the ``metrics``
control command at scrape time; the admin app turns the snapshot into Prometheus
families (``docs/metrics.md``). Recording is a dictionary update, cheap enough for the
Python paths of both routers; the C forward loop sums per call and hands the sums over.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from router_core.control.replies import HistogramSnapshot, RouterMetrics, TrafficRow
from router_core.counters import Counters
from router_core.histogram import HOP_BUCKETS, SPLIT_ROW_BUCKETS, HistogramSet
from router_core.process_usage import cpu_seconds, resident_bytes

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = [
    "HOP_BOUNDS_NS",
    "MAX_TRAFFIC_ROWS",
    "OTHER_PEER",
    "Route",
    "TrafficStats",
    "fabric_metrics",
    "histograms_of",
    "message_bytes",
]

#: Route labels (``docs/metrics.md``).
Route = str
#: ``(route, peer)`` rows kept at most: peers come from the wire (worker ids, return
#: addresses), so beyond this many a new peer is counted under :data:`OTHER_PEER`.
MAX_TRAFFIC_ROWS: Final = 4096
OTHER_PEER: Final = "other"

FORWARD: Final = "forward"
BACKWARD: Final = "backward"
BROADCAST: Final = "broadcast"
CONTROL: Final = "control"
DETOKENIZE: Final = "detokenize"

#: The hop latency bucket bounds in integer nanoseconds, for the C forward loop.
HOP_BOUNDS_NS: Final = tuple(round(bound * 1e9) for bound in HOP_BUCKETS)


def message_bytes(frames: Sequence[FrameLike]) -> int:
    """The size of a message: every frame's bytes."""
    return sum(len(frame) for frame in frames)


class TrafficStats:
    """Messages and bytes per ``(route, peer)``, hop latency and split sizes per route."""

    def __init__(self) -> None:
        self._traffic: dict[tuple[str, str], list[int]] = {}
        self.hop_latency = HistogramSet(HOP_BUCKETS)
        self.split_rows = HistogramSet(SPLIT_ROW_BUCKETS)

    def add(self, route: Route, peer: str, messages: int, nbytes: int) -> None:
        """Count ``messages`` of ``nbytes`` in all on ``route`` to or from ``peer`` (under
        ``other`` once :data:`MAX_TRAFFIC_ROWS` rows exist)."""
        entry = self._traffic.get((route, peer))
        if entry is None and len(self._traffic) >= MAX_TRAFFIC_ROWS:
            peer = OTHER_PEER
            entry = self._traffic.get((route, peer))
        if entry is None:
            self._traffic[(route, peer)] = [messages, nbytes]
        else:
            entry[0] += messages
            entry[1] += nbytes

    def observe_hop(self, route: Route, sent_ns: int, now_ns: int | None = None) -> None:
        """Record the latency of a message sent at ``sent_ns`` (0: not stamped, ignored)."""
        if sent_ns <= 0:
            return
        elapsed = ((time.time_ns() if now_ns is None else now_ns) - sent_ns) / 1e9
        self.hop_latency.observe(route, max(elapsed, 0.0))

    def add_hop_counts(self, route: Route, per_bucket: Sequence[int], total_s: float) -> None:
        """Merge per-bucket latency counts summed elsewhere (the C forward loop)."""
        self.hop_latency.merge(route, per_bucket, total_s)

    def totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """``(messages, bytes)`` per ``(route, peer)``."""
        return {key: (entry[0], entry[1]) for key, entry in self._traffic.items()}

    def snapshot(self) -> dict[str, Any]:
        """``traffic`` rows and the two histogram sets, plain data for the control socket."""
        return {
            "traffic": [
                {"route": route, "worker": peer, "messages": messages, "bytes": nbytes}
                for (route, peer), (messages, nbytes) in sorted(self._traffic.items())
            ],
            "hop_latency_seconds": self.hop_latency.snapshot(),
            "split_batch_rows": self.split_rows.snapshot(),
        }


def histograms_of(series: HistogramSet) -> dict[str, HistogramSnapshot]:
    """A histogram set as typed snapshots, by label value."""
    converted: dict[str, HistogramSnapshot] = msgspec.convert(
        series.snapshot(), dict[str, HistogramSnapshot]
    )
    return converted


def fabric_metrics(
    process: str, traffic: TrafficStats, counters: Counters, backlog_messages: int
) -> RouterMetrics:
    """What both routers' ``metrics`` replies share, typed: who answers, what it moved,
    what it dropped and rejected, its histograms and what waits in its backlogs."""
    counted = counters.snapshot()
    return RouterMetrics(
        process=process,
        pid=os.getpid(),
        traffic=[
            TrafficRow(route=route, worker=peer, messages=messages, bytes=nbytes)
            for (route, peer), (messages, nbytes) in sorted(traffic.totals().items())
        ],
        dropped=counted.get("dropped", {}),
        rejected=counted.get("rejected", {}),
        histograms={
            "hop_latency_seconds": histograms_of(traffic.hop_latency),
            "split_batch_rows": histograms_of(traffic.split_rows),
        },
        backlog_messages=backlog_messages,
        cpu_seconds=cpu_seconds(),
        resident_bytes=resident_bytes(),
    )
