"""SGLang's operator endpoints on the serving port: pause, continue, abort, load, version.

RL and weight-update tooling calls these on the server's URL. The three that change the
stack are the admin app's commands, reached through it (:mod:`.admin_client`): each is
passed on, body and ``Authorization`` header as they came, to the admin app's endpoint
of the same name, so it is the same barrier, roles, validation and audit as
``switchboard pause`` or the console:

* ``POST /pause_generation`` ``{"mode": "abort"|"retract"|"in_place", "timeout_s": 5}``
  (SGLang's ``PauseGenerationReqInput``, mode ``abort`` by default; ``timeout_s`` is
  ours, the barrier's): the admin app's ``/api/pause``;
* ``POST /continue_generation`` ``{"timeout_s": 5}``: its ``/api/continue``;
* ``POST /abort_request`` ``{"rid": "...", "abort_all": false}`` (SGLang's ``AbortReq``):
  its ``/api/abort``; the engine ends that request (or every one) with finish reason
  abort, whichever worker holds it.

Each needs an operator's token (``Authorization: Bearer``); the body is optional (none:
the defaults) and read as JSON whatever its ``Content-Type``, as the admin app reads it
(the token, which no web page can make a browser send across sites without a preflight,
is what protects these), and fields SGLang sends that mean nothing here are ignored.
Success is SGLang's ``{"message", "status": "ok"}`` with the admin app's answer beside
it (``operation``, or the abort's ``rid``, ``abort_all`` and ``sent_for``).

The reads answer from this worker alone, without a token, as SGLang's do and as
``/get_server_info`` (which shows the same load) does: ``GET /get_load`` is SGLang's list
of one load per data-parallel rank (one here: the engine's latest snapshot, ours under
``switchboard``), ``GET /version`` ``{"version": ...}``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import msgspec
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.catalogue import DEFAULT_BARRIER_TIMEOUT_S
from app.models import AbortRequest, SglangContinueRequest, SglangPauseRequest
from router_core.limits import MAX_BARRIER_TIMEOUT_S
from router_core.wire.control import LoadSnapshot
from switchboard.worker.admin_client import AdminClient, AdminRefusal
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.errors import error_body

__all__ = ["barrier_wait_s", "install", "load_entry", "router"]

router = APIRouter(tags=["sglang operator"])

#: The admin app's path of each command, which is also this worker's.
_PAUSE, _CONTINUE, _ABORT = "/pause_generation", "/continue_generation", "/abort_request"
_AUTH_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    400: {"description": "a bad body (the admin app's message)"},
    401: {"description": "no operator token, or one the admin app does not know"},
    403: {"description": "a viewer's token"},
    503: {"description": "no admin URL, the admin app or the router does not answer"},
}


def _documented(model: type[BaseModel], *, barrier: bool) -> dict[str, Any]:
    """The route's OpenAPI extras: the body it passes on (it reads no body itself)."""
    schema = {"content": {"application/json": {"schema": model.model_json_schema()}}}
    responses = dict(_AUTH_RESPONSES)
    if barrier:
        responses[504] = {"description": "not every worker and the engine acknowledged"}
    return {"openapi_extra": {"requestBody": {**schema, "required": False}}, "responses": responses}


def barrier_wait_s(body: bytes) -> float:
    """How long a barrier sent ``body`` may take: its ``timeout_s`` when that is a number
    the admin app accepts, else the default (a bad body is refused at once anyway)."""
    try:
        value = json.loads(body).get("timeout_s") if body.strip() else None
    except (ValueError, AttributeError):
        return DEFAULT_BARRIER_TIMEOUT_S
    if not isinstance(value, int | float) or isinstance(value, bool):
        return DEFAULT_BARRIER_TIMEOUT_S
    return float(value) if 0 < value <= MAX_BARRIER_TIMEOUT_S else DEFAULT_BARRIER_TIMEOUT_S


async def _forward(request: Request, path: str, *, barrier: bool) -> dict[str, Any]:
    admin: AdminClient = request.app.state.admin_client
    admin.check_configured()
    body = await request.body()
    wait_s = barrier_wait_s(body) if barrier else 0.0
    return await admin.forward(path, body, request.headers.get("authorization"), wait_s=wait_s)


@router.post(_PAUSE, **_documented(SglangPauseRequest, barrier=True))
async def pause_generation(request: Request) -> dict[str, Any]:
    """Pause generation on every worker and the engine (the admin app's barrier, with the
    caller's operator token): 200 once all acknowledged, 504 naming who did not."""
    operation = await _forward(request, _PAUSE, barrier=True)
    return {"message": "Generation paused successfully.", "status": "ok", "operation": operation}


@router.post(_CONTINUE, **_documented(SglangContinueRequest, barrier=True))
async def continue_generation(request: Request) -> dict[str, Any]:
    """Resume generation (the admin app's barrier); the same answers as pause."""
    operation = await _forward(request, _CONTINUE, barrier=True)
    return {
        "message": "Generation continued successfully.",
        "status": "ok",
        "operation": operation,
    }


@router.post(_ABORT, **_documented(AbortRequest, barrier=False))
async def abort_request(request: Request) -> dict[str, Any]:
    """Abort request ``rid``, or every request with ``abort_all``, in the engine: each ends
    with finish reason abort, its client answered. 400 for neither; 200 whether or not
    ``rid`` was in flight (no one knows which worker holds it: the engine is told for
    each, ``sent_for``)."""
    result = await _forward(request, _ABORT, barrier=False)
    return {"message": "Abort sent to the engine.", "status": "ok", **result}


def load_entry(load: LoadSnapshot | None, now_ns: int) -> dict[str, Any]:
    """SGLang's ``GetLoadReqOutput`` of the engine's load snapshot ``load`` (zeros before
    the first): ``num_reqs`` running plus waiting, ``num_tokens`` its KV cells in use (0
    from an engine without a KV cache), and the snapshot itself under ``switchboard``
    (``null`` before the first), with its age in seconds at ``now_ns``."""
    if load is None:
        entry: dict[str, Any] = {"num_reqs": 0, "num_waiting_reqs": 0, "num_tokens": 0}
        return {"dp_rank": 0, **entry, "switchboard": None}
    # Every field of the snapshot (a field added to it shows here too) but the stack key,
    # which a worker's copy does not hold and an HTTP answer must never carry.
    ours = {key: value for key, value in msgspec.structs.asdict(load).items() if key != "secret"}
    ours["age_s"] = max(0.0, (now_ns - load.taken_ns) / 1e9) if load.taken_ns else None
    return {
        "dp_rank": 0,
        "num_reqs": load.running + load.waiting,
        "num_waiting_reqs": load.waiting,
        "num_tokens": load.kv_cells_used,
        "switchboard": ours,
    }


@router.get("/get_load")
async def get_load(generation: GenerationDep) -> list[dict[str, Any]]:
    """The engine's load as SGLang's ``/get_load`` answers it: one entry per
    data-parallel rank (here one), read locally (no round trip, no token)."""
    return [load_entry(generation.link.load, time.time_ns())]


@router.get("/version")
async def version(settings: SettingsDep) -> dict[str, str]:
    """This worker's version (no token)."""
    return {"version": settings.version or "dev"}


def install(app: FastAPI, admin: AdminClient) -> None:
    """Serve these endpoints on ``app``, forwarding to ``admin``; an
    :class:`AdminRefusal` is answered in the worker's error shape, its reason as the
    error's ``cause``, and counted in the link's ``http_rejected`` under it."""
    app.state.admin_client = admin

    async def on_refusal(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, AdminRefusal)
        app.state.link.counters.add("http_rejected", error.reason)
        body = error_body(error.message, error.kind, error.status)
        body["error"]["cause"] = error.reason  # one word a client can branch on
        body["error"].update(error.extra)
        return JSONResponse(body, status_code=error.status, headers=error.headers or None)

    app.add_exception_handler(AdminRefusal, on_refusal)
    app.include_router(router)
