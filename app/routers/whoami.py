"""``/api/whoami``: which token this is and what it may do, so a client can offer only the
actions its role allows."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import Viewer
from app.errors import error_responses
from app.models import Identity

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["auth"])


@router.get("/whoami", response_model=Identity, responses=error_responses(401))
async def whoami(principal: Viewer) -> Identity:
    """The token's name and role (``viewer`` or ``operator``)."""
    return Identity(name=principal.name, role=principal.role)
