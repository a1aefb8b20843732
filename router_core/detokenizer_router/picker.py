"""Which detokenizer handles which request: sticky, by crc32, as the seed does."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Literal

__all__ = ["DetokenizerPicker", "StickyKey"]

#: ``worker``: crc32 of the owning worker's return address (the seed: every request of
#: a worker on one detokenizer). ``request``: crc32 of the request id (better balance
#: when few workers carry most of the load).
StickyKey = Literal["worker", "request"]


class DetokenizerPicker:
    """Maps rows to detokenizer indices; the same key always maps to the same index."""

    def __init__(self, count: int, key: StickyKey = "worker") -> None:
        if count <= 0:
            raise ValueError("need at least one detokenizer")
        self.count = count
        self.key = key

    def pick(self, rid: str, reply_to: str) -> int:
        """The detokenizer for one request."""
        text = reply_to if self.key == "worker" else rid
        return zlib.crc32(text.encode()) % self.count

    def group(self, rids: Sequence[str], reply_to: Sequence[str]) -> dict[int, list[int]]:
        """Row indices per detokenizer index, in row order."""
        groups: dict[int, list[int]] = {}
        keys = reply_to if self.key == "worker" else rids
        count = self.count
        for row, text in enumerate(keys):
            groups.setdefault(zlib.crc32(text.encode()) % count, []).append(row)
        return groups
