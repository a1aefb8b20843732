"""``/api/status``: pause state and mode, since when, recent operations, engine, versions."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.deps import Router
from app.errors import error_responses
from app.models import Status
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["status"])


@bind(router, command("status"), response_model=Status, responses=error_responses(401, 503))
async def get_status(control: Router) -> Status:
    """The router's pause state, its latest operations, the engine and the versions."""
    return await control.status()
