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

from app.audit import audit
from app.catalogue import Command, command
from app.deps import Poller, Router
from app.errors import ApiException, error_responses
from app.models import (
    ApiError,
    ContinueRequest,
    Operation,
    OperationTimedOut,
    PauseMode,
    PauseRequest,
    SglangPauseRequest,
)
from app.routers.binding import Caller, bind
from app.tokens import Principal

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
    who: Principal,
    control: Router,
    poller: Poller,
    action: Command,
    *,
    mode: PauseMode | None,
    timeout_s: float,
) -> Operation | JSONResponse:
    """Run ``action`` (pause, with its ``mode``, or continue), audited whatever happens."""
    pausing = action is PAUSE
    if pausing == (mode is None):
        raise ValueError(f"{action.name}: a pause has a mode and a continue has none")
    try:
        if mode is not None:
            operation = await control.pause(mode, timeout_s)
        else:
            operation = await control.resume(timeout_s)
    except ApiException as exc:
        audit(who.name, action, "all", "error", f"{exc.code}: {exc.message}")
        raise
    except BaseException:
        # Cancelled (the app is stopping mid-barrier): the router may still apply the
        # operation, so the audit log must say it was asked for.
        audit(who.name, action, "all", "error", "cancelled before the router answered")
        raise
    finally:
        poller.wake()
    prefix = f"mode={mode} " if pausing else ""
    if operation.complete:
        detail = f"{prefix}op={operation.op_id} acked={_names(operation.acked)}"
        audit(who.name, action, "all", "ok", detail)
        return operation
    detail = f"{prefix}op={operation.op_id} stragglers={_names(operation.stragglers)}"
    audit(who.name, action, "all", "timeout", detail)
    stragglers = ", ".join(operation.stragglers)
    message = f"{action.name} not acknowledged within {timeout_s:g} s by: {stragglers}"
    body = OperationTimedOut(
        **operation.model_dump(), error=ApiError(code="timeout", message=message)
    )
    return JSONResponse(body.model_dump(), status_code=504)


@bind(router, PAUSE, response_model=Operation, responses=_RESPONSES)
async def pause(
    who: Caller, control: Router, poller: Poller, body: PauseRequest | None = None
) -> Operation | JSONResponse:
    """Pause generation: ``abort`` returns in-flight requests, ``retract`` puts running
    ones back in the queue, ``in_place`` freezes them. 200 when every worker and the
    engine acknowledged; 504 naming the stragglers after ``timeout_s``."""
    request = body or PauseRequest()
    return await _barrier(
        who, control, poller, PAUSE, mode=request.mode, timeout_s=request.timeout_s
    )


@bind(router, CONTINUE, response_model=Operation, responses=_RESPONSES)
async def continue_(
    who: Caller, control: Router, poller: Poller, body: ContinueRequest | None = None
) -> Operation | JSONResponse:
    """Resume generation; the same barrier and answers as pause."""
    request = body or ContinueRequest()
    return await _barrier(who, control, poller, CONTINUE, mode=None, timeout_s=request.timeout_s)


@bind(router, PAUSE, path="/pause_generation", response_model=Operation, responses=_RESPONSES)
async def pause_generation(
    who: Caller, control: Router, poller: Poller, body: SglangPauseRequest | None = None
) -> Operation | JSONResponse:
    """SGLang's name for ``POST /api/pause`` (body optional; mode ``abort`` by default)."""
    request = body or SglangPauseRequest()
    return await _barrier(
        who, control, poller, PAUSE, mode=request.mode, timeout_s=request.timeout_s
    )


@bind(
    router,
    CONTINUE,
    path="/continue_generation",
    response_model=Operation,
    responses=_RESPONSES,
)
async def continue_generation(
    who: Caller, control: Router, poller: Poller, body: ContinueRequest | None = None
) -> Operation | JSONResponse:
    """SGLang's name for ``POST /api/continue`` (an empty body is fine)."""
    request = body or ContinueRequest()
    return await _barrier(who, control, poller, CONTINUE, mode=None, timeout_s=request.timeout_s)
