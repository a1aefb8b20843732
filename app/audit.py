"""The admin app's audit records: one per mutation attempt, refused ones included.

Each record goes through :class:`router_core.audit.AuditLog` (the format the routers
share) to the logger ``switchboard.audit`` and, with ``audit_log`` set, to that JSON-lines
file. Its fields, in this order:

``who``
    the token's name (never its value); ``-`` (null) when no known token was sent;
``action``
    the audited command of :mod:`app.catalogue` (``pause``, ``continue``, ``drain``,
    ``undrain``, ``freeze_gc``);
``target``
    the worker's id, or ``all``;
``result``
    ``ok`` (2xx), ``timeout`` (504: not every participant acknowledged), ``refused``
    (4xx: nothing was done: no token, forbidden, bad body, not found, conflict, too
    large) or ``error`` (the router failed or did not answer, or the request was cut
    short: it may or may not have applied the command);
``status``
    the HTTP status answered (``-`` when the request ended before any was sent);
``reason``
    the error code answered (``unauthorized``, ``forbidden``, ``bad_request``, ...),
    ``-`` for a success;
``detail``
    what happened: the handler's account (``mode=abort op=... acked=...``) or else the
    error message;
``client``
    the peer's ``address:port``;
``trace_id``
    the request's trace, only while tracing is on.

Each record is also kept in the app's :mod:`app.audit_trail` (``GET /api/audit``).
Reads are never audited. :class:`app.guard.MutationGuard` writes the records; a handler
adds its account through the request's :class:`AuditNote`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from app.audit_trail import trail_of
from app.catalogue import Command
from router_core.audit import AuditLog

__all__ = ["AUDIT_LOGGER", "AuditNote", "AuditResult", "audit", "audit_log", "result_of"]

#: The logger every audit line goes to.
AUDIT_LOGGER: Final = "switchboard.audit"

AuditResult = Literal["ok", "timeout", "refused", "error"]


def result_of(status: int | None) -> AuditResult:
    """The ``result`` of a mutation answered ``status`` (None: no answer was sent)."""
    if status is None:
        return "error"
    if 200 <= status < 300:
        return "ok"
    if status == 504:
        return "timeout"
    if 400 <= status < 500:
        return "refused"
    return "error"


@dataclass
class AuditNote:
    """What a mutation's handler tells its audit record: ``detail``, its account of what
    happened (the operation, who acknowledged, the worker's new state). ``who`` is the
    operator the guard authenticated, for the handler to name to the router."""

    detail: str | None = None
    who: str = ""


def audit(
    log: AuditLog,
    action: Command,
    *,
    who: str | None,
    target: str,
    status: int | None,
    reason: str | None,
    detail: str | None,
    client: str | None,
    trace_id: str | None = None,
) -> None:
    """Write the record of one attempt at ``action`` (fields as the module docstring
    says); ValueError for a command that is not audited."""
    if not action.audited:
        raise ValueError(f"the {action.name!r} command is not audited")
    fields: dict[str, str | int | None] = {
        "who": who,
        "action": action.name,
        "target": target,
        "result": result_of(status),
        "status": status,
        "reason": reason,
        "detail": detail,
        "client": client,
    }
    if trace_id:
        fields["trace_id"] = trace_id
    log.record(**fields)
    trail_of(log).add(fields)


def audit_log(file: Path | None) -> AuditLog:
    """The app's :class:`AuditLog`: ``switchboard.audit``, and ``file`` when given."""
    return AuditLog(logging.getLogger(AUDIT_LOGGER), file)
