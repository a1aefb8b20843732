"""engine-check's output: the table a person reads, the JSON document CI reads, the
exit status.

Pure functions of the findings. The table has one line per duty (``ok``, ``FAIL`` or
``not run`` and what was seen); a failure adds a second line with the fix. The JSON
document holds the same, one object per duty, in the same order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from switchboard.admin_cli.render import table
from switchboard.engine_check.findings import Finding, Status

__all__ = ["as_json", "as_table", "exit_status", "summary"]


def exit_status(findings: Sequence[Finding]) -> int:
    """0 when every duty that ran conforms (and one ran at all), else 1."""
    if any(finding.status is Status.FAIL for finding in findings):
        return 1
    return 0 if any(finding.status is Status.OK for finding in findings) else 1


def summary(findings: Sequence[Finding]) -> str:
    """``17 ok, 1 FAIL, 2 not run``."""
    counts = Counter(finding.status for finding in findings)
    return ", ".join(f"{counts[status]} {status.value}" for status in Status)


def as_table(findings: Sequence[Finding]) -> str:
    """The table: ``duty  result  detail``, a failure's fix on the line below its detail."""
    rows: list[list[str]] = []
    for finding in findings:
        rows.append([finding.name, finding.status.value, finding.detail])
        if finding.fix:
            rows.append(["", "", f"fix: {finding.fix}"])
    return f"{table(['duty', 'result', 'detail'], rows)}\n{summary(findings)}"


def as_json(findings: Sequence[Finding], engine: str, last_lines: str = "") -> str:
    """One JSON document: ``{"engine", "ok", "exit_status", "summary", "last_lines",
    "duties": [...]}``, each duty ``{"name", "status", "detail", "fix"}`` (``status``
    ``ok``, ``FAIL`` or ``not run``; ``fix`` ``""`` unless it failed); ``last_lines`` the
    engine's last lines of output when a duty failed (``""`` otherwise)."""
    document: dict[str, Any] = {
        "engine": engine,
        "ok": exit_status(findings) == 0,
        "exit_status": exit_status(findings),
        "summary": summary(findings),
        "last_lines": last_lines if exit_status(findings) else "",
        "duties": [
            {
                "name": finding.name,
                "status": finding.status.value,
                "detail": finding.detail,
                "fix": finding.fix,
            }
            for finding in findings
        ],
    }
    return json.dumps(document, indent=2)
