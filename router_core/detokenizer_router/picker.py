"""Which detokenizer handles which request: sticky, so a request's state stays in one place.

A detokenizer keeps per-request decoding state, so every output of a request must reach
the same detokenizer. Three ways to choose, by ``StickyKey``:

* ``worker`` (the default): each worker, the first time one of its rows is seen, goes to
  the detokenizer with the fewest workers so far (ties: the lowest index) and stays
  there. Balanced whatever the worker addresses look like. The assignment outlives the
  detokenizer router when it keeps a state file: a restarted one is given the old
  assignment (``assigned``), so its workers' requests stay with the detokenizers that
  hold their state; :attr:`DetokenizerPicker.changed` says when there is a new one to save.
* ``worker-crc32``: the seed's ``crc32(worker address) % M``. Stable across restarts, but
  crc32 is linear, so addresses that differ in a few low bits (``worker-w0``,
  ``worker-w1``, ...) can all land on one detokenizer.
* ``request``: ``crc32(rid) % M``; request ids are random, so rows spread evenly even
  when one worker carries most of the load.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Final, Literal

__all__ = ["MAX_ASSIGNED_WORKERS", "DetokenizerPicker", "StickyKey"]

StickyKey = Literal["worker", "worker-crc32", "request"]

#: Worker assignments remembered at most; beyond it the oldest one is forgotten.
MAX_ASSIGNED_WORKERS: Final = 65_536


class DetokenizerPicker:
    """Maps rows to detokenizer indices; a key keeps its index once it has one."""

    def __init__(
        self, count: int, key: StickyKey = "worker", assigned: Mapping[str, int] | None = None
    ) -> None:
        if count <= 0:
            raise ValueError("need at least one detokenizer")
        if key not in ("worker", "worker-crc32", "request"):
            raise ValueError(f"unknown sticky key {key!r}")
        self.count = count
        self.key = key
        self._assigned: OrderedDict[str, int] = OrderedDict()
        self._workers_per_index = [0] * count
        #: Whether an assignment was made (or forgotten) since :meth:`take_changed`.
        self.changed = False
        for owner, index in (assigned or {}).items():
            if 0 <= index < count and len(self._assigned) < MAX_ASSIGNED_WORKERS:
                self._assigned[owner] = index
                self._workers_per_index[index] += 1

    def take_changed(self) -> bool:
        """Whether the assignment changed since the last call (then saved by the caller)."""
        changed, self.changed = self.changed, False
        return changed

    def pick(self, rid: str, reply_to: str) -> int:
        """The detokenizer for one request."""
        if self.key == "worker":
            return self._assign(reply_to)
        text = reply_to if self.key == "worker-crc32" else rid
        return zlib.crc32(text.encode()) % self.count

    def group(self, rids: Sequence[str], reply_to: Sequence[str]) -> dict[int, list[int]]:
        """Row indices per detokenizer index, in row order."""
        groups: dict[int, list[int]] = {}
        if self.key == "worker":
            for row, owner in enumerate(reply_to):
                groups.setdefault(self._assign(owner), []).append(row)
            return groups
        keys = reply_to if self.key == "worker-crc32" else rids
        count = self.count
        for row, text in enumerate(keys):
            groups.setdefault(zlib.crc32(text.encode()) % count, []).append(row)
        return groups

    def assignments(self) -> dict[str, int]:
        """Worker address -> detokenizer index, for ``status`` (``worker`` key only)."""
        return dict(self._assigned)

    def _assign(self, owner: str) -> int:
        index = self._assigned.get(owner)
        if index is not None:
            return index
        loads = self._workers_per_index
        index = loads.index(min(loads))
        loads[index] += 1
        self._assigned[owner] = index
        self.changed = True
        if len(self._assigned) > MAX_ASSIGNED_WORKERS:
            _, forgotten = self._assigned.popitem(last=False)
            loads[forgotten] -= 1
        return index
