"""Tests for the detokenizer picker: balanced or crc32 sticky choice, and row grouping."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router_core.detokenizer_router.picker import DetokenizerPicker

SETTINGS = settings(max_examples=100, deadline=None)

COUNTS = st.integers(min_value=1, max_value=16)
KEYS = st.text(max_size=40)


def seed_index(key: str, count: int) -> int:
    """The seed's choice: crc32 of the UTF-8 key modulo the detokenizer count."""
    return zlib.crc32(key.encode()) % count


class TestDetokenizerPicker:
    """DetokenizerPicker.pick and group."""

    @pytest.mark.parametrize("count", [0, -1])
    def test_count_must_be_positive(self, count: int) -> None:
        """A picker needs at least one detokenizer."""
        with pytest.raises(ValueError):
            DetokenizerPicker(count)

    def test_unknown_key_is_refused(self) -> None:
        """A misspelt sticky key is an error, not a silent default."""
        with pytest.raises(ValueError, match="sticky key"):
            DetokenizerPicker(2, key="workers")  # type: ignore[arg-type]

    def test_known_values(self) -> None:
        """Picks match precomputed crc32 values, so a change of hash is caught."""
        picker = DetokenizerPicker(4, key="worker-crc32")
        assert zlib.crc32(b"ipc:///run/worker-0") % 4 == picker.pick("r", "ipc:///run/worker-0")
        assert picker.pick("anything", "") == 0  # crc32(b"") == 0

    def test_default_worker_addresses_skew_under_crc32(self) -> None:
        """Why crc32 is not the default: w0..w3 all share one detokenizer of two."""
        addresses = [f"ipc:///tmp/switchboard-x/worker-w{i}" for i in range(4)]
        crc = DetokenizerPicker(2, key="worker-crc32")
        assert len({crc.pick("r", address) for address in addresses}) == 1
        balanced = DetokenizerPicker(2)
        assert [balanced.pick("r", address) for address in addresses] == [0, 1, 0, 1]

    @SETTINGS
    @given(count=COUNTS, owners=st.lists(KEYS, unique=True, max_size=40))
    def test_worker_key_balances_workers(self, count: int, owners: list[str]) -> None:
        """Workers are spread so no detokenizer has more than one worker above another."""
        picker = DetokenizerPicker(count)
        per_index = [0] * count
        for owner in owners:
            per_index[picker.pick("r", owner)] += 1
        assert max(per_index) - min(per_index) <= 1
        assert picker.assignments() == {o: picker.pick("x", o) for o in owners}

    @SETTINGS
    @given(count=COUNTS, rid=KEYS, reply_to=KEYS, other_rid=KEYS)
    def test_worker_key_is_sticky_to_reply_to(
        self, count: int, rid: str, reply_to: str, other_rid: str
    ) -> None:
        """With key=worker the index depends on reply_to alone and never changes."""
        picker = DetokenizerPicker(count)
        index = picker.pick(rid, reply_to)
        picker.pick("other", reply_to + "-other")
        assert picker.pick(other_rid, reply_to) == index
        assert 0 <= index < count

    @SETTINGS
    @given(count=COUNTS, rid=KEYS, reply_to=KEYS, other_rid=KEYS)
    def test_worker_crc32_key_is_the_seed_rule(
        self, count: int, rid: str, reply_to: str, other_rid: str
    ) -> None:
        """With key=worker-crc32 the index is the seed's crc32 of reply_to, whatever the rid."""
        picker = DetokenizerPicker(count, key="worker-crc32")
        index = picker.pick(rid, reply_to)
        assert index == seed_index(reply_to, count)
        assert picker.pick(other_rid, reply_to) == index
        assert 0 <= index < count

    @SETTINGS
    @given(count=COUNTS, rid=KEYS, reply_to=KEYS, other_owner=KEYS)
    def test_request_key_uses_rid(
        self, count: int, rid: str, reply_to: str, other_owner: str
    ) -> None:
        """With key=request the index is the crc32 of the rid, whatever the owner."""
        picker = DetokenizerPicker(count, key="request")
        assert picker.pick(rid, reply_to) == seed_index(rid, count)
        assert picker.pick(rid, other_owner) == picker.pick(rid, reply_to)

    @SETTINGS
    @given(
        count=COUNTS,
        key=st.sampled_from(["worker", "worker-crc32", "request"]),
        rows=st.lists(st.tuples(KEYS, KEYS), max_size=30),
    )
    def test_group_covers_rows_once_in_order(
        self, count: int, key: str, rows: list[tuple[str, str]]
    ) -> None:
        """group() puts every row in exactly one group, the one pick() names, in row order."""
        picker = DetokenizerPicker(count, key=key)  # type: ignore[arg-type]
        rids = [rid for rid, _ in rows]
        owners = [owner for _, owner in rows]
        groups = picker.group(rids, owners)
        flat = sorted(row for members in groups.values() for row in members)
        assert flat == list(range(len(rows)))
        for index, members in groups.items():
            assert members, "no empty groups"
            assert members == sorted(members)
            assert all(picker.pick(rids[row], owners[row]) == index for row in members)

    def test_group_of_nothing_is_empty(self) -> None:
        """No rows, no groups."""
        assert DetokenizerPicker(3).group([], []) == {}
