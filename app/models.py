"""The admin API's request and response bodies (pydantic), so ``/openapi.json`` is complete.

:mod:`app.views` turns the router's control replies, and the command catalogue, into these.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from router_core.wire.control import PauseMode

__all__ = [
    "AbortResult",
    "ApiError",
    "CommandArgument",
    "CommandConsole",
    "CommandInfo",
    "CommandList",
    "EngineInfo",
    "ErrorBody",
    "ErrorCode",
    "FreezeGcResult",
    "Health",
    "Identity",
    "Load",
    "LoadEvent",
    "LoadResponse",
    "Operation",
    "OperationTimedOut",
    "PauseEvent",
    "PauseMode",
    "Readiness",
    "RouterInfo",
    "Snapshot",
    "Status",
    "Versions",
    "Worker",
    "WorkerEvent",
    "WorkerList",
    "WorkerState",
]

#: ``unresponsive``: registered but silent for over half the heartbeat timeout.
WorkerState = Literal[
    "starting", "serving", "paused", "draining", "drained", "unresponsive", "dead"
]
ErrorCode = Literal[
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "bad_request",
    "method_not_allowed",
    "router_unavailable",
    "engine_failed",
    "timeout",
    "too_many_streams",
    "body_too_large",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApiError(_Model):
    """What went wrong: a stable snake_case code and a sentence for humans."""

    code: ErrorCode
    message: str


class ErrorBody(_Model):
    """Every error answer: ``{"error": {"code", "message"}}``."""

    error: ApiError


class Worker(_Model):
    """One HTTP worker as the router sees it (departed workers: state ``dead``)."""

    id: str
    state: WorkerState
    pid: int
    host: str
    endpoint: str = Field(description="the worker's return address (ipc:// or tcp://)")
    version: str
    registered_at: float = Field(description="Unix time of its registration")
    last_heartbeat_at: float = Field(description="Unix time of its latest heartbeat")
    last_heartbeat_s_ago: float
    inflight: int = Field(description="requests in flight")
    requests_sent: int = Field(description="requests it sent to the router (its total)")
    rows_received: int = Field(description="output rows it received (its total)")
    safe_to_delete: bool = Field(description="drained with nothing in flight, or dead")
    departure_reason: str | None = Field(
        default=None, description="why a dead worker left: deregistered, dead_worker or replaced"
    )


class WorkerList(_Model):
    """``GET /api/workers``."""

    workers: list[Worker]


class Operation(_Model):
    """One pause or continue barrier and how it ended."""

    op_id: str
    seq: int
    action: Literal["pause", "continue"]
    mode: str | None
    complete: bool = Field(description="every participant acknowledged (or left)")
    acked: list[str] = Field(description="participants that acknowledged (engine included)")
    stragglers: list[str] = Field(description="participants that did not acknowledge in time")
    departed: list[str] = Field(description="participants that left during the operation")
    elapsed_s: float
    finished_at: float = Field(description="Unix time the operation ended")


class OperationTimedOut(Operation):
    """A 504: the operation, not complete, naming its stragglers, and the error."""

    error: ApiError


class Load(_Model):
    """The engine's latest load snapshot and its age."""

    running: int
    waiting: int
    max_running: int
    token_usage: float
    step: int
    taken_ns: int
    age_s: float
    kv_cells_used: int = Field(0, description="KV-cache cells in use (0: no KV cache)")
    kv_cells_total: int = Field(0, description="KV-cache cells in all (0: no KV cache)")
    tokens_per_s: float = Field(0.0, description="tokens processed per second, recently")
    context_length: int = Field(0, description="the most tokens one request may hold (0: none)")
    engine_started_ns: int = Field(
        0, description="when this engine incarnation started, Unix ns (a change: it restarted)"
    )
    features: list[str] = Field(
        default_factory=list,
        description="what the engine honours beyond the sampling every engine takes (logprobs)",
    )
    weight_version: str = Field(
        "", description="the version of the weights serving (empty: the engine's own)"
    )


class LoadResponse(_Model):
    """``GET /api/load``: the latest load, or null before the engine's first report."""

    load: Load | None


class EngineInfo(_Model):
    live: bool = Field(description="the engine reported within the router's engine timeout")
    load: Load | None


class Versions(_Model):
    admin: str
    router: str


class RouterInfo(_Model):
    pid: int
    uptime_s: float


class Status(_Model):
    """``GET /api/status``: pause state, recent operations, engine, workers, versions."""

    paused: bool
    pause_mode: str | None
    pause_state_since: float = Field(description="Unix time the pause state last changed")
    recent_operations: list[Operation] = Field(description="oldest first")
    engine: EngineInfo
    workers: dict[str, int] = Field(description="registered workers by state")
    versions: Versions
    router: RouterInfo


class AbortResult(_Model):
    """``POST /api/abort``: what was aborted, and for which workers the engine was told."""

    rid: str = Field(description="the request aborted (empty with abort_all)")
    abort_all: bool
    sent_for: list[str] = Field(
        description="the registered workers the engine was told to abort it for: the "
        "router does not know which one owns a request id, so it tells the engine for each"
    )


class FreezeGcResult(_Model):
    """``POST /api/freeze_gc``: who froze, and who was asked to."""

    frozen: list[str]
    forwarded_to: list[str]


class Identity(_Model):
    """Who a token is: its configured name and its role."""

    name: str
    role: Literal["viewer", "operator"]


class Health(_Model):
    status: Literal["ok"] = "ok"


class Readiness(_Model):
    """``GET /readyz``: 200 when both are true, else 503."""

    router: bool = Field(description="the router answers on its control socket")
    engine: bool = Field(description="the router sees a live engine")


class Snapshot(_Model):
    """The first ``/api/events`` event."""

    workers: list[Worker]
    status: Status


class WorkerEvent(_Model):
    """A ``worker`` event."""

    change: Literal["registered", "state", "updated", "departed"]
    worker: Worker


class PauseEvent(_Model):
    """A ``pause`` event: the status after the pause state or operations changed."""

    status: Status


class LoadEvent(_Model):
    """A ``load`` event."""

    load: Load


class CommandArgument(_Model):
    """One argument of a command: a body field or a path parameter."""

    name: str
    place: Literal["body", "path"]
    summary: str
    choices: list[str] = Field(description="the values it may take (empty: any)")
    default: str | bool | float | None = Field(
        description="what the API assumes when it is left out"
    )
    type: Literal["str", "bool", "int", "float"] = Field(description="the value's JSON type")
    required: bool = Field(description="whether it must be given")


class CommandConsole(_Model):
    """How the console offers a command."""

    scope: Literal["generation", "worker", "engine"] = Field(
        description="with the pause controls, on each worker's row, or in the engine panel"
    )
    label: str
    confirm: str = Field(description="the question asked before it acts (empty: none)")
    states: list[str] = Field(description="the worker states a worker's action applies in")


class CommandInfo(_Model):
    """One command of the admin API, as the catalogue describes it."""

    name: str
    method: Literal["GET", "POST"]
    path: str
    aliases: list[str] = Field(description="SGLang's names for the same path")
    role: Literal["viewer", "operator"] = Field(description="the role a token needs")
    audited: bool = Field(description="each call writes an audit line")
    barrier: bool = Field(
        description="it waits for every worker and the engine (504 with stragglers)"
    )
    engine: bool = Field(description="the engine carries it out (502 when it fails)")
    summary: str
    arguments: list[CommandArgument]
    cli: str | None = Field(description="its switchboard subcommand, if it has one")
    console: CommandConsole | None = Field(description="its console control, if it has one")


class CommandList(_Model):
    """``GET /api/commands``: every command of the admin API."""

    commands: list[CommandInfo]
