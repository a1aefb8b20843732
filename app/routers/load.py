"""``/api/load``: the engine's latest load snapshot."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.deps import Router
from app.errors import error_responses
from app.models import LoadResponse
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["engine"])


@bind(router, command("load"), response_model=LoadResponse, responses=error_responses(401, 503))
async def get_load(control: Router) -> LoadResponse:
    """Running and waiting requests, token usage and step of the engine; null before its
    first report."""
    return LoadResponse(load=await control.load())
