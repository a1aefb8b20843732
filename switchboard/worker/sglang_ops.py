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
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from app.catalogue import COMMANDS, Command
from app.command_bodies import body_model
from router_core.limits import DEFAULT_BARRIER_TIMEOUT_S, MAX_BARRIER_TIMEOUT_S
from router_core.wire.control import LoadSnapshot
from switchboard.worker.admin_client import AdminClient, AdminRefusal
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.errors import error_body

__all__ = ["barrier_wait_s", "install", "load_entry", "router"]

router = APIRouter(tags=["sglang operator"])

_AUTH_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    400: {"description": "a bad body (the admin app's message)"},
    401: {"description": "no operator token, or one the admin app does not know"},
    403: {"description": "a viewer's token"},
    503: {"description": "no admin URL, the admin app or the router does not answer"},
}


def _documented(entry: Command) -> dict[str, Any]:
    """The route's OpenAPI extras: the body it passes on (it reads no body itself)."""
    model = body_model(entry, lenient=True)
    schema = {"content": {"application/json": {"schema": model.model_json_schema()}}}
    responses = dict(_AUTH_RESPONSES)
    if entry.barrier:
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


def _passing_on(entry: Command, path: str) -> Callable[[Request], Awaitable[dict[str, Any]]]:
    """The handler that passes ``path`` on to the admin app, and wraps its answer in
    SGLang's: ``{"message", "status": "ok"}`` with a barrier's operation under
    ``operation``, or any other command's answer beside them."""

    async def pass_on(request: Request) -> dict[str, Any]:
        admin: AdminClient = request.app.state.admin_client
        admin.check_configured()
        body = await request.body()
        timed = any(argument.name == "timeout_s" for argument in entry.arguments)
        wait_s = barrier_wait_s(body) if timed else 0.0
        answer = await admin.forward(
            path, body, request.headers.get("authorization"), wait_s=wait_s
        )
        done = {"message": entry.route.sglang_message, "status": "ok"}
        return {**done, "operation": answer} if entry.barrier else {**done, **answer}

    pass_on.__name__ = path.strip("/")
    pass_on.__doc__ = (
        f"SGLang's name for the admin app's ``{entry.method} {entry.path}`` ({entry.summary}), "
        "passed on to it with the caller's operator token."
    )
    return pass_on


for _entry in COMMANDS:
    for _alias in _entry.aliases:
        router.add_api_route(
            _alias,
            _passing_on(_entry, _alias),
            methods=[_entry.method, *_entry.route.sglang_methods],
            **_documented(_entry),
        )


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
