"""Tests for the event counters a routing loop keeps."""

from __future__ import annotations

from router_core.counters import Counters


class TestCounters:
    """Counters: named, labelled integers with totals and a safe snapshot."""

    def test_unknown_counters_read_zero(self) -> None:
        """A counter or label never added reads 0; so does the total of an unknown counter."""
        counters = Counters()
        assert counters.get("dropped", "backlog_full") == 0
        assert counters.total("dropped") == 0
        assert counters.snapshot() == {}

    def test_reading_does_not_create_series(self) -> None:
        """get() and total() of unknown names leave the snapshot empty."""
        counters = Counters()
        counters.get("a", "b")
        counters.total("c")
        assert counters.snapshot() == {}

    def test_add_and_total(self) -> None:
        """add() accumulates per label; total() sums the labels of one counter."""
        counters = Counters()
        counters.add("dropped", "backlog_full")
        counters.add("dropped", "backlog_full", 4)
        counters.add("dropped", "closed", 2)
        counters.add("forwarded", "generate", 9)
        assert counters.get("dropped", "backlog_full") == 5
        assert counters.get("dropped", "closed") == 2
        assert counters.total("dropped") == 7
        assert counters.total("forwarded") == 9

    def test_snapshot_is_a_detached_plain_copy(self) -> None:
        """snapshot() returns plain dicts that later adds (or edits to it) do not share."""
        counters = Counters()
        counters.add("rejected", "bad_header")
        snapshot = counters.snapshot()
        assert snapshot == {"rejected": {"bad_header": 1}}
        assert type(snapshot["rejected"]) is dict
        counters.add("rejected", "bad_header")
        snapshot["rejected"]["bad_header"] = 100
        assert snapshot["rejected"]["bad_header"] == 100
        assert counters.get("rejected", "bad_header") == 2
