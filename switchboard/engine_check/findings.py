"""What engine-check concludes about each duty: a :class:`Finding` per row, in order.

Pure. :data:`DUTIES` is the table's rows in the order they are checked and printed; the
names are stable (tests and CI scripts select rows by them).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = ["DUTIES", "Finding", "Status", "failed", "not_run", "ok", "ordered"]


class Status(StrEnum):
    """A row's verdict: the duty conforms, does not, or could not be checked."""

    OK = "ok"
    FAIL = "FAIL"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Finding:
    """One duty's verdict. ``detail`` says what was seen (or why it was not run);
    ``fix`` (failures only) what the engine must do, naming the docs' field or section."""

    name: str
    status: Status
    detail: str = ""
    fix: str = ""


#: Every row of the table, in the order the duties are checked.
DUTIES: Final = (
    "load.first",
    "load.interval",
    "generate.rows",
    "generate.usage",
    "generate.batching",
    "generate.max_new_tokens",
    "stop.token_ids",
    "stop.strings",
    "stop.eos",
    "abort.one",
    "abort.all",
    "pause.abort",
    "pause.retract",
    "pause.in_place",
    "continue",
    "pause.stale",
    "engine_command",
    "embed",
    "bad_frames",
    "freeze_gc",
    "restart",
)


def ok(name: str, detail: str = "") -> Finding:
    """The duty conforms; ``detail`` what was seen."""
    return Finding(name, Status.OK, detail)


def failed(name: str, detail: str, fix: str) -> Finding:
    """The duty does not conform: what was seen, and the fix."""
    return Finding(name, Status.FAIL, detail, fix)


def not_run(name: str, why: str) -> Finding:
    """The duty could not be checked, and why."""
    return Finding(name, Status.NOT_RUN, why)


def ordered(findings: list[Finding]) -> list[Finding]:
    """``findings`` in :data:`DUTIES` order, one per duty: a duty with none is ``not run``
    and, of several for one duty, the first is kept."""
    first: dict[str, Finding] = {}
    for finding in findings:
        first.setdefault(finding.name, finding)
    return [first.get(name) or not_run(name, "not reached") for name in DUTIES]
