"""``/api/workers``: list and read workers; drain and undrain one (operators)."""

from __future__ import annotations

from fastapi import APIRouter

from app.audit import AuditAction, audit
from app.deps import Operator, Poller, Router, Viewer
from app.errors import ApiException, error_responses
from app.models import Worker, WorkerList

__all__ = ["router"]

router = APIRouter(prefix="/api/workers", tags=["workers"])


@router.get("", response_model=WorkerList, responses=error_responses(401, 503))
async def list_workers(_: Viewer, control: Router) -> WorkerList:
    """Every worker the router knows, recently departed ones as ``dead``."""
    return WorkerList(workers=await control.workers())


@router.get("/{worker_id}", response_model=Worker, responses=error_responses(401, 404, 503))
async def get_worker(worker_id: str, _: Viewer, control: Router) -> Worker:
    """One worker; 404 for an id the router does not know."""
    return await control.worker(worker_id)


async def _drain(
    worker_id: str, drain: bool, who: Viewer, control: Router, poller: Poller
) -> Worker:
    action: AuditAction = "drain" if drain else "undrain"
    try:
        worker = await control.drain(worker_id, drain=drain)
    except ApiException as exc:
        audit(who.name, action, worker_id, "error", f"{exc.code}: {exc.message}")
        raise
    poller.wake()
    audit(who.name, action, worker_id, "ok", f"state={worker.state}")
    return worker


_MUTATION_ERRORS = error_responses(400, 401, 403, 404, 409, 503)


@router.post("/{worker_id}/drain", response_model=Worker, responses=_MUTATION_ERRORS)
async def drain_worker(worker_id: str, who: Operator, control: Router, poller: Poller) -> Worker:
    """Stop the worker admitting requests; it reaches ``drained`` (``safe_to_delete``) once
    its in-flight requests finish. 409 if it is already draining, drained or dead."""
    return await _drain(worker_id, True, who, control, poller)


@router.post("/{worker_id}/undrain", response_model=Worker, responses=_MUTATION_ERRORS)
async def undrain_worker(worker_id: str, who: Operator, control: Router, poller: Poller) -> Worker:
    """Let a draining or drained worker admit requests again; 409 for any other state."""
    return await _drain(worker_id, False, who, control, poller)
