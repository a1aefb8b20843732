"""Tests for the traffic stats routing loops keep: traffic per route and peer, and hop
latency."""

from __future__ import annotations

import time

import pytest

from router_core.histogram import HOP_BUCKETS
from router_core.traffic import HOP_BOUNDS_NS, TrafficStats


class TestTrafficStats:
    def test_traffic_adds_up_per_route_and_peer(self) -> None:
        """Messages and bytes accumulate per (route, peer) and come out sorted."""
        stats = TrafficStats()
        stats.add("forward", "w1", 1, 10)
        stats.add("forward", "w0", 2, 30)
        stats.add("forward", "w1", 3, 5)
        assert stats.snapshot()["traffic"] == [
            {"route": "forward", "worker": "w0", "messages": 2, "bytes": 30},
            {"route": "forward", "worker": "w1", "messages": 4, "bytes": 15},
        ]

    def test_hop_latency_ignores_unstamped_messages(self) -> None:
        """sent_ns 0 means the sender did not stamp it: nothing is observed."""
        stats = TrafficStats()
        now = time.time_ns()
        stats.observe_hop("forward", 0, now)
        stats.observe_hop("forward", now - 2_000_000, now)
        series = stats.hop_latency.get("forward")
        assert series is not None and series.count == 1
        assert series.sum == pytest.approx(0.002)

    def test_nanosecond_bounds_match_the_seconds_bounds(self) -> None:
        """The C loop's integer bounds are the shared hop buckets, in nanoseconds."""
        assert [ns / 1e9 for ns in HOP_BOUNDS_NS] == pytest.approx(list(HOP_BUCKETS))


class TestTrafficBound:
    def test_rows_are_bounded_and_the_rest_counted_as_other(self) -> None:
        """Peers come from the wire: past the bound they share one ``other`` row, and no
        message goes uncounted."""
        from router_core.traffic import MAX_TRAFFIC_ROWS, OTHER_PEER, TrafficStats

        stats = TrafficStats()
        for index in range(MAX_TRAFFIC_ROWS + 50):
            stats.add("forward", f"w{index}", 1, 10)
        totals = stats.totals()
        assert len(totals) == MAX_TRAFFIC_ROWS + 1
        assert totals[("forward", OTHER_PEER)] == (50, 500)
        assert sum(messages for messages, _ in totals.values()) == MAX_TRAFFIC_ROWS + 50
