"""``/api/audit``: the latest audit records of this admin app, newest first (viewers too).

Each record is one mutation attempt through this app, refused ones included (see
:mod:`app.audit` for the fields and :mod:`app.audit_trail` for what is kept); ``who`` is
a token's name, never its value. The same records arrive live as ``audit`` events on
``/api/events``.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Depends, Query, Request

from app.audit_trail import AuditPage, AuditTrail
from app.catalogue import command
from app.errors import error_responses
from app.routers.binding import bind

__all__ = ["MAX_LIMIT", "router"]

router = APIRouter(tags=["audit"])

#: The most records one answer holds (the trail keeps no more by default).
MAX_LIMIT: Final = 200


def _trail(request: Request) -> AuditTrail:
    trail: AuditTrail = request.app.state.audit_trail
    return trail


Trail = Annotated[AuditTrail, Depends(_trail)]


@bind(router, command("audit"), response_model=AuditPage, responses=error_responses(400, 401))
async def audit_records(
    trail: Trail,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="records at most")] = 50,
) -> AuditPage:
    """The latest ``limit`` audit records, newest first."""
    return trail.page(limit)
