"""The audit trail: the most recent audit records of this admin app, kept in memory.

:func:`app.audit.audit` hands every record it writes to the trail of its
:class:`~router_core.audit.AuditLog` (:func:`trail_of`), so the trail holds exactly what
the log and the audit file got, refused attempts included, numbered in order (``seq``
from 1). It keeps the latest ``capacity`` records (a ring: the oldest are forgotten
first) and answers ``GET /api/audit`` newest first. ``who`` is a token's *name*, never
its value (that is all an audit record holds); strings are cut as the log cuts them
(:data:`router_core.audit.MAX_VALUE_CHARS`). A listener set with :meth:`AuditTrail.follow`
hears of each record as it is added (the admin app publishes it as the ``audit`` event
of ``/api/events``).

Pure: no I/O, no HTTP; one trail per audit log, so each app has its own.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Final

from pydantic import BaseModel, Field

from router_core.audit import MAX_VALUE_CHARS, AuditLog

__all__ = [
    "DEFAULT_CAPACITY",
    "AuditEntry",
    "AuditPage",
    "AuditTrail",
    "trail_of",
]

#: Records a trail keeps unless told otherwise.
DEFAULT_CAPACITY: Final = 200


class AuditEntry(BaseModel):
    """One audit record as the trail keeps it (the fields of :mod:`app.audit`)."""

    seq: int = Field(description="the record's number in this admin app's run, from 1")
    time: float = Field(description="Unix time the record was written")
    who: str | None = Field(description="the token's name; null when no known token was sent")
    action: str = Field(description="the audited command (pause, continue, drain, ...)")
    target: str = Field(description="the worker's id, or all")
    result: str = Field(description="ok, timeout, refused or error")
    status: int | None = Field(description="the HTTP status answered; null if none was sent")
    reason: str | None = Field(description="the error code answered; null for a success")
    detail: str | None = Field(description="the handler's account, or the error message")
    client: str | None = Field(description="the peer's address:port")


class AuditPage(BaseModel):
    """``GET /api/audit``: the latest records, newest first."""

    records: list[AuditEntry]
    capacity: int = Field(description="how many records the trail keeps at most")
    total: int = Field(description="records written since the admin app started")


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "..."


class AuditTrail:
    """The latest ``capacity`` audit records (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, clock: Callable[[], float] = time.time):
        if capacity < 1:
            raise ValueError("an audit trail keeps at least one record")
        self.capacity = capacity
        self._clock = clock
        self._records: deque[AuditEntry] = deque(maxlen=capacity)
        self._total = 0
        self._listener: Callable[[AuditEntry], None] | None = None

    @property
    def total(self) -> int:
        """Records added so far (the latest ``seq``)."""
        return self._total

    def follow(self, listener: Callable[[AuditEntry], None] | None) -> None:
        """Call ``listener`` with each record added from now on (None: nobody); it
        replaces any earlier listener."""
        self._listener = listener

    def add(self, fields: Mapping[str, object]) -> AuditEntry:
        """Keep the record of ``fields`` (an audit record's, by name) and tell the listener."""
        self._total += 1
        status = fields.get("status")
        entry = AuditEntry(
            seq=self._total,
            time=self._clock(),
            who=_text(fields.get("who")),
            action=_text(fields.get("action")) or "",
            target=_text(fields.get("target")) or "",
            result=_text(fields.get("result")) or "",
            status=status if isinstance(status, int) else None,
            reason=_text(fields.get("reason")),
            detail=_text(fields.get("detail")),
            client=_text(fields.get("client")),
        )
        self._records.append(entry)
        if self._listener is not None:
            self._listener(entry)
        return entry

    def latest(self, limit: int) -> list[AuditEntry]:
        """Up to ``limit`` records, newest first."""
        if limit <= 0:
            return []
        newest = list(self._records)[-limit:]
        newest.reverse()
        return newest

    def page(self, limit: int) -> AuditPage:
        return AuditPage(records=self.latest(limit), capacity=self.capacity, total=self._total)


_TRAILS: Final[weakref.WeakKeyDictionary[AuditLog, AuditTrail]] = weakref.WeakKeyDictionary()


def trail_of(log: AuditLog) -> AuditTrail:
    """The trail of ``log``, made on first use: one per audit log, gone with it."""
    trail = _TRAILS.get(log)
    if trail is None:
        trail = _TRAILS[log] = AuditTrail()
    return trail
