"""``/healthz`` (the process is up) and ``/readyz`` (the router answers, the engine is live).

Both are unauthenticated: load balancers and the supervisor probe them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.deps import Router
from app.models import Health, Readiness

__all__ = ["router"]

router = APIRouter(tags=["health"])

#: How long readiness waits for the router; a probe must answer quickly either way.
_READY_TIMEOUT_S = 1.0

_NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"model": Readiness, "description": "the router does not answer or sees no engine"}
}


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """200 while the process runs."""
    return Health()


@router.get("/readyz", response_model=Readiness, responses=_NOT_READY)
async def readyz(control: Router) -> Readiness | JSONResponse:
    """200 when the router answers and sees a live engine; 503 (same body) otherwise."""
    status = await control.answers(_READY_TIMEOUT_S)
    readiness = Readiness(
        router=status is not None, engine=status is not None and status.engine_live
    )
    if readiness.router and readiness.engine:
        return readiness
    return JSONResponse(readiness.model_dump(), status_code=503)
