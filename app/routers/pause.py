"""Pause and continue generation: a barrier across every worker and the engine.

``POST /api/pause`` and ``POST /api/continue`` answer 200 with the operation once every
participant acknowledged, and 504 with the same operation (``complete: false``, the
stragglers named) plus an ``error`` when the timeout passed first. ``POST
/pause_generation`` and ``POST /continue_generation`` are SGLang's names for the same.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.audit import AuditNote
from app.catalogue import Command, command
from app.deps import Note, Poller, Router
from app.errors import error_responses
from app.models import (
    ApiError,
    ContinueRequest,
    Operation,
    OperationTimedOut,
    PauseMode,
    PauseRequest,
    SglangContinueRequest,
    SglangPauseRequest,
)
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["pause"])

PAUSE, CONTINUE = command("pause"), command("continue")

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses(400, 401, 403, 503),
    504: {
        "model": OperationTimedOut,
        "description": "timeout: not every participant acknowledged in time",
    },
}


def _names(names: list[str]) -> str:
    return ",".join(names) or "-"


async def _barrier(
    note: AuditNote,
    control: Router,
    poller: Poller,
    action: Command,
    *,
    mode: PauseMode | None,
    timeout_s: float,
) -> Operation | JSONResponse:
    """Run ``action`` (pause, with its ``mode``, or continue); its account goes in
    ``note``, for the request's audit record."""
    pausing = action is PAUSE
    if pausing == (mode is None):
        raise ValueError(f"{action.name}: a pause has a mode and a continue has none")
    prefix = f"mode={mode} " if pausing else ""
    note.detail = f"{prefix}timeout_s={timeout_s:g}"
    try:
        if mode is not None:
            operation = await control.pause(mode, timeout_s, by=note.who)
        else:
            operation = await control.resume(timeout_s, by=note.who)
    finally:
        poller.wake()
    if operation.complete:
        note.detail = f"{prefix}op={operation.op_id} acked={_names(operation.acked)}"
        return operation
    note.detail = f"{prefix}op={operation.op_id} stragglers={_names(operation.stragglers)}"
    stragglers = ", ".join(operation.stragglers)
    message = f"{action.name} not acknowledged within {timeout_s:g} s by: {stragglers}"
    body = OperationTimedOut(
        **operation.model_dump(), error=ApiError(code="timeout", message=message)
    )
    return JSONResponse(body.model_dump(), status_code=504)


@bind(router, PAUSE, response_model=Operation, responses=_RESPONSES)
async def pause(
    note: Note, control: Router, poller: Poller, body: PauseRequest | None = None
) -> Operation | JSONResponse:
    """Pause generation: ``abort`` returns in-flight requests, ``retract`` puts running
    ones back in the queue, ``in_place`` freezes them. 200 when every worker and the
    engine acknowledged; 504 naming the stragglers after ``timeout_s``."""
    request = body or PauseRequest()
    return await _barrier(
        note, control, poller, PAUSE, mode=request.mode, timeout_s=request.timeout_s
    )


@bind(router, CONTINUE, response_model=Operation, responses=_RESPONSES)
async def continue_(
    note: Note, control: Router, poller: Poller, body: ContinueRequest | None = None
) -> Operation | JSONResponse:
    """Resume generation; the same barrier and answers as pause."""
    request = body or ContinueRequest()
    return await _barrier(note, control, poller, CONTINUE, mode=None, timeout_s=request.timeout_s)


@bind(router, PAUSE, path="/pause_generation", response_model=Operation, responses=_RESPONSES)
async def pause_generation(
    note: Note, control: Router, poller: Poller, body: SglangPauseRequest | None = None
) -> Operation | JSONResponse:
    """SGLang's name for ``POST /api/pause`` (body optional; mode ``abort`` by default)."""
    request = body or SglangPauseRequest()
    return await _barrier(
        note, control, poller, PAUSE, mode=request.mode, timeout_s=request.timeout_s
    )


@bind(
    router,
    CONTINUE,
    path="/continue_generation",
    response_model=Operation,
    responses=_RESPONSES,
)
async def continue_generation(
    note: Note, control: Router, poller: Poller, body: SglangContinueRequest | None = None
) -> Operation | JSONResponse:
    """SGLang's name for ``POST /api/continue`` (body optional; fields SGLang sends that
    mean nothing here are ignored)."""
    request = body or SglangContinueRequest()
    return await _barrier(note, control, poller, CONTINUE, mode=None, timeout_s=request.timeout_s)
