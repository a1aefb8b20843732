"""The audit log: one line per mutation on logger ``switchboard.audit``.

``audit who=<token name> action=<pause|continue|drain|undrain|freeze_gc> target=<...>
result=<ok|timeout|error> detail=<...>``. The token's name, never its value.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

__all__ = ["AuditAction", "AuditResult", "audit"]

logger = logging.getLogger("switchboard.audit")

AuditAction = Literal["pause", "continue", "drain", "undrain", "freeze_gc"]
AuditResult = Literal["ok", "timeout", "error"]


def _field(value: str) -> str:
    """``value`` as one ``key=value`` field: quoted (JSON) when it has spaces or quotes."""
    if value and not any(char.isspace() or char in "\"'=" for char in value):
        return value
    return json.dumps(value)


def audit(who: str, action: AuditAction, target: str, result: AuditResult, detail: str) -> None:
    """Write one audit line."""
    logger.info(
        "audit who=%s action=%s target=%s result=%s detail=%s",
        _field(who),
        action,
        _field(target),
        result,
        _field(detail),
    )
