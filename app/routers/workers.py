"""``/api/workers``: list and read workers (drain and undrain: :mod:`app.routers.operations`)."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.deps import Router
from app.errors import error_responses
from app.models import Worker, WorkerList
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["workers"])


@bind(
    router, command("list_workers"), response_model=WorkerList, responses=error_responses(401, 503)
)
async def list_workers(control: Router) -> WorkerList:
    """Every worker the router knows, recently departed ones as ``dead``."""
    return WorkerList(workers=await control.workers())


@bind(
    router, command("get_worker"), response_model=Worker, responses=error_responses(401, 404, 503)
)
async def get_worker(worker_id: str, control: Router) -> Worker:
    """One worker; 404 for an id the router does not know."""
    return await control.worker(worker_id)
