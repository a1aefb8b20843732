"""``/api/freeze_gc``: freeze the garbage collector in the router, engine and detokenizers."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.deps import Note, Router
from app.errors import error_responses
from app.models import FreezeGcResult
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["engine"])

FREEZE_GC = command("freeze_gc")


@bind(router, FREEZE_GC, response_model=FreezeGcResult, responses=error_responses(401, 403, 503))
async def freeze_gc(note: Note, control: Router) -> FreezeGcResult:
    """Freeze GC in the router and ask the engine (and through it the detokenizers and
    workers) to do the same, after warm-up, so long-lived objects are never scanned."""
    result = await control.freeze_gc(by=note.who)
    note.detail = "frozen=" + ",".join(result.frozen)
    return result
