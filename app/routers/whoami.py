"""``/api/whoami``: which token this is and what it may do, so a client can offer only the
actions its role allows."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.errors import error_responses
from app.models import Identity
from app.routers.binding import Caller, bind

__all__ = ["router"]

router = APIRouter(tags=["auth"])


@bind(router, command("whoami"), response_model=Identity, responses=error_responses(401))
async def whoami(principal: Caller) -> Identity:
    """The token's name and role (``viewer`` or ``operator``)."""
    return Identity(name=principal.name, role=principal.role)
