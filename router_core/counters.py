"""Event counters kept by a routing loop and read by ``status`` at request time.

Counters are plain integers keyed by a counter name and one label value, e.g.
``("rejected", "bad_header")``. They live in the loop's process and are only ever
touched from the loop's thread, so no lock is needed.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["Counters"]


class Counters:
    """Named counters, each split by one label value."""

    def __init__(self) -> None:
        self._values: defaultdict[str, defaultdict[str, int]] = defaultdict(
            lambda: defaultdict(int)
        )

    def add(self, name: str, label: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name`` for ``label``."""
        self._values[name][label] += amount

    def get(self, name: str, label: str) -> int:
        """The current value, 0 if never counted."""
        series = self._values.get(name)
        return 0 if series is None else series.get(label, 0)

    def total(self, name: str) -> int:
        """The sum over all labels of counter ``name``."""
        series = self._values.get(name)
        return 0 if series is None else sum(series.values())

    def snapshot(self) -> dict[str, dict[str, int]]:
        """A plain-dict copy, safe to encode and hand out."""
        return {name: dict(series) for name, series in self._values.items()}
