"""``/api/workers``: list and read workers; drain and undrain one (operators)."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import Command, command
from app.deps import Note, Poller, Router
from app.errors import error_responses
from app.models import Worker, WorkerList
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["workers"])

DRAIN, UNDRAIN = command("drain"), command("undrain")


@bind(router, command("workers"), response_model=WorkerList, responses=error_responses(401, 503))
async def list_workers(control: Router) -> WorkerList:
    """Every worker the router knows, recently departed ones as ``dead``."""
    return WorkerList(workers=await control.workers())


@bind(router, command("worker"), response_model=Worker, responses=error_responses(401, 404, 503))
async def get_worker(worker_id: str, control: Router) -> Worker:
    """One worker; 404 for an id the router does not know."""
    return await control.worker(worker_id)


async def _drain(
    worker_id: str, action: Command, note: Note, control: Router, poller: Poller
) -> Worker:
    worker = await control.drain(worker_id, drain=action is DRAIN, by=note.who)
    poller.wake()
    note.detail = f"state={worker.state}"
    return worker


_MUTATION_ERRORS = error_responses(400, 401, 403, 404, 409, 503)


@bind(router, DRAIN, response_model=Worker, responses=_MUTATION_ERRORS)
async def drain_worker(worker_id: str, note: Note, control: Router, poller: Poller) -> Worker:
    """Stop the worker admitting requests; it reaches ``drained`` (``safe_to_delete``) once
    its in-flight requests finish. 409 if it is already draining, drained or dead."""
    return await _drain(worker_id, DRAIN, note, control, poller)


@bind(router, UNDRAIN, response_model=Worker, responses=_MUTATION_ERRORS)
async def undrain_worker(worker_id: str, note: Note, control: Router, poller: Poller) -> Worker:
    """Let a draining or drained worker admit requests again; 409 for any other state."""
    return await _drain(worker_id, UNDRAIN, note, control, poller)
