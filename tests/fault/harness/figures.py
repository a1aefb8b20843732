"""The figures a fault test measured, printed as it ends and gathered for the summary.

A test fills one :class:`Figures` (outcome counts, then named values such as a
recovery time) and calls :meth:`Figures.report`: the figures are printed (captured
output, shown with ``-s`` or when the test fails), kept for the terminal summary that
``tests/fault/conftest.py`` prints at the end of the run, and appended as one JSON line
to the file ``$SWITCHBOARD_FAULT_FIGURES`` names, if set: ``docs/reliability.md``'s
results are rendered from such a file (``harness/reliability_table.py``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fault.harness.classify import Outcome
from tests.fault.harness.load import RequestRecord

__all__ = ["FIGURES_ENV", "REPORTED", "Figures"]

FIGURES_ENV = "SWITCHBOARD_FAULT_FIGURES"
#: Every report of this test session, in order (read by the terminal summary).
REPORTED: list[Figures] = []


@dataclass
class Figures:
    """One test's figures: outcome ``counts`` per group of requests (``all``, ``in flight
    at kill``, ...), ``values`` by name, ``notes`` as lines; ``engine`` is the stack's
    (``sim`` or ``llama-cpp``, ``StackConfig.engine``)."""

    test: str
    engine: str = "sim"
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def outcomes(self, records: Iterable[RequestRecord], group: str = "all") -> Counter[Outcome]:
        """Count ``records`` by outcome as ``counts[group]``."""
        tally = Counter(record.outcome for record in records)
        self.counts[group] = {outcome.value: tally[outcome] for outcome in Outcome}
        return tally

    def failures(self, records: Iterable[RequestRecord]) -> None:
        """Note the commonest clear-error causes and every wrong or hung request."""
        chosen = [record for record in records if record.verdict is not None]
        causes = Counter(
            record.verdict.cause[:100]
            for record in chosen
            if record.verdict is not None and record.outcome is Outcome.CLEAR_ERROR
        )
        for cause, count in causes.most_common(6):
            self.note(f"clear error x{count}: {cause}")
        for record in chosen:
            if record.outcome in (Outcome.WRONG_TEXT, Outcome.HUNG):
                self.note(record.describe())

    def set(self, name: str, value: Any) -> None:
        self.values[name] = round(value, 3) if isinstance(value, float) else value

    def note(self, line: str) -> None:
        self.notes.append(line)

    def render(self) -> str:
        values = ", ".join(f"{name} {value}" for name, value in self.values.items())
        lines = [f"[fault figures] {self.test} ({self.engine} engine)"]
        for group, tally in self.counts.items():
            counted = ", ".join(f"{outcome} {count}" for outcome, count in tally.items())
            lines.append(f"  {group}: {counted}")
        if values:
            lines.append(f"  {values}")
        lines += [f"  {note}" for note in self.notes[:40]]
        if len(self.notes) > 40:
            lines.append(f"  ... {len(self.notes) - 40} more")
        return "\n".join(lines)

    def report(self) -> None:
        """Print, keep for the summary, and append to ``$SWITCHBOARD_FAULT_FIGURES``."""
        print(self.render())
        REPORTED.append(self)
        path = os.environ.get(FIGURES_ENV)
        if path:
            line = {"test": self.test, "engine": self.engine, "counts": self.counts}
            line["values"] = _plain(self.values)
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({**line, "notes": self.notes[:40]}) + "\n")


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: a map's keys as strings (a ``(process, reason)``
    key as ``process/reason``), tuples as lists, sets as sorted lists, anything else
    unknown as text."""
    if isinstance(value, dict):
        return {
            "/".join(map(str, key)) if isinstance(key, tuple) else str(key): _plain(item)
            for key, item in value.items()
        }
    if isinstance(value, set | frozenset):
        return [_plain(item) for item in sorted(value, key=str)]
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
