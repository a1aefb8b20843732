"""The audit log: one line per mutation on logger ``switchboard.audit``.

``audit who=<token name> action=<command> target=<...> result=<ok|timeout|error>
detail=<...>``: the action is the name of an audited command of :mod:`app.catalogue`
(``pause``, ``continue``, ``drain``, ``undrain``, ``freeze_gc``). The token's name,
never its value.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

from app.catalogue import Command

__all__ = ["AuditResult", "audit"]

logger = logging.getLogger("switchboard.audit")

AuditResult = Literal["ok", "timeout", "error"]


def _field(value: str) -> str:
    """``value`` as one ``key=value`` field: quoted (JSON) when it has spaces or quotes."""
    if value and not any(char.isspace() or char in "\"'=" for char in value):
        return value
    return json.dumps(value)


def audit(who: str, action: Command, target: str, result: AuditResult, detail: str) -> None:
    """Write one audit line for ``action``; ValueError for a command that is not audited."""
    if not action.audited:
        raise ValueError(f"the {action.name!r} command is not audited")
    logger.info(
        "audit who=%s action=%s target=%s result=%s detail=%s",
        _field(who),
        action.name,
        _field(target),
        result,
        _field(detail),
    )
