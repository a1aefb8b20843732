"""Every operator command, once: one :class:`ControlCommand` per command.

Each object is shared by the router that serves it (its table binds a handler to it),
by every client that calls it (:meth:`ControlClient.request` decodes the reply as its
``reply_type``), by the admin app (its route, role and audit), the CLI (its subcommand)
and the console (its control, through ``GET /api/commands``), so no two of them can
disagree about a name, a shape or a default. Adding a command is an object here and its
handler in the router core (and in the engine, for one with an :class:`EngineStep`).
Pure: no sockets. Wire shapes: ``docs/protocol.md`` 6; the model:
:mod:`router_core.control.command_model`.
"""

from __future__ import annotations

from typing import Any, Final

from router_core.control.command_args import (
    AbortArgs,
    ContinueArgs,
    FlushCacheArgs,
    ListWorkersArgs,
    NoArgs,
    PauseArgs,
    UpdateWeightsArgs,
    WorkerArgs,
)
from router_core.control.command_model import Cli, Console, ControlCommand, EngineStep, Http
from router_core.control.replies import (
    AbortReply,
    DetokenizerRouterStatus,
    FlushCacheReply,
    FreezeGcReply,
    LoadReply,
    OperationOutcome,
    RouterMetrics,
    RouterStatus,
    TokenizerRouterMetrics,
    UpdateWeightsReply,
    WorkerView,
)
from router_core.wire import Kind
from router_core.wire.control import ContinueRequest, FreezeGC, PauseRequest
from router_core.wire.requests import AbortRequest

__all__ = [
    "ABORT",
    "ADMIN_COMMANDS",
    "CONTINUE",
    "DETOKENIZER_ROUTER_COMMANDS",
    "DETOK_METRICS",
    "DETOK_STATUS",
    "DRAIN",
    "FLUSH_CACHE",
    "FREEZE_GC",
    "GET_WORKER",
    "LIST_WORKERS",
    "LOAD",
    "METRICS",
    "OPERATOR_COMMANDS",
    "PAUSE",
    "STATUS",
    "TOKENIZER_ROUTER_COMMANDS",
    "UNDRAIN",
    "UPDATE_WEIGHTS",
]

#: Worker states a drain applies in, and those an undrain applies in.
_DRAINABLE: Final = ("starting", "serving", "paused")
_UNDRAINABLE: Final = ("draining", "drained")

STATUS: Final = ControlCommand[NoArgs, RouterStatus](
    "status",
    NoArgs,
    RouterStatus,
    "pause state and mode, recent operations, engine, workers by state, versions",
    http=Http("GET", "/api/status", "viewer"),
    cli=Cli(
        "status",
        "show pause state, engine load, workers by state and recent operations",
        render="status",
        watch=True,
    ),
)
LIST_WORKERS: Final = ControlCommand[ListWorkersArgs, list[WorkerView]](
    "list_workers",
    ListWorkersArgs,
    list[WorkerView],
    "every worker the router knows, recently departed ones as dead",
    http=Http("GET", "/api/workers", "viewer", fixed={"include_departed": True}),
    cli=Cli(
        "workers",
        "list the workers: state, in-flight, last heartbeat, safe to delete",
        render="workers",
        watch=True,
    ),
)
GET_WORKER: Final = ControlCommand[WorkerArgs, WorkerView](
    "get_worker",
    WorkerArgs,
    WorkerView,
    "one worker (a departed one as dead); 404 for an id the router does not know",
    http=Http("GET", "/api/workers/{worker_id}", "viewer"),
)
PAUSE: Final = ControlCommand[PauseArgs, OperationOutcome](
    "pause",
    PauseArgs,
    OperationOutcome,
    "pause generation on every worker and the engine (a barrier)",
    mutates=True,
    barrier=True,
    http=Http(
        "POST",
        "/api/pause",
        "operator",
        aliases=("/pause_generation",),
        sglang_message="Generation paused successfully.",
    ),
    cli=Cli(
        "pause",
        "pause generation on every worker and the engine",
        render="operation",
        flag_aliases={"timeout_s": ("--timeout",)},
    ),
    console=Console("generation", "Pause"),
    audit=("mode",),
    engine=EngineStep(Kind.PAUSE, PauseRequest),
)
CONTINUE: Final = ControlCommand[ContinueArgs, OperationOutcome](
    "continue",
    ContinueArgs,
    OperationOutcome,
    "resume generation (a barrier)",
    mutates=True,
    barrier=True,
    http=Http(
        "POST",
        "/api/continue",
        "operator",
        aliases=("/continue_generation",),
        sglang_message="Generation continued successfully.",
    ),
    cli=Cli(
        "continue",
        "resume generation after a pause",
        render="operation",
        flag_aliases={"timeout_s": ("--timeout",)},
    ),
    console=Console("generation", "Continue"),
    engine=EngineStep(Kind.CONTINUE, ContinueRequest),
)
DRAIN: Final = ControlCommand[WorkerArgs, WorkerView](
    "drain",
    WorkerArgs,
    WorkerView,
    "take one worker off its port: no new connections; it finishes what it holds and "
    "reaches drained once empty",
    mutates=True,
    http=Http("POST", "/api/workers/{worker_id}/drain", "operator"),
    cli=Cli(
        "drain",
        "take one worker off its port (it takes no new connections and finishes what it holds)",
        render="worker",
        wait=True,
    ),
    console=Console("worker", "Drain", states=_DRAINABLE),
)
UNDRAIN: Final = ControlCommand[WorkerArgs, WorkerView](
    "undrain",
    WorkerArgs,
    WorkerView,
    "let a draining or drained worker admit requests again",
    mutates=True,
    http=Http("POST", "/api/workers/{worker_id}/undrain", "operator"),
    cli=Cli("undrain", "let a draining or drained worker admit requests again", render="worker"),
    console=Console("worker", "Undrain", states=_UNDRAINABLE),
)
ABORT: Final = ControlCommand[AbortArgs, AbortReply](
    "abort",
    AbortArgs,
    AbortReply,
    "abort one request in the engine by its id, or every request",
    mutates=True,
    http=Http(
        "POST",
        "/api/abort",
        "operator",
        aliases=("/abort_request",),
        sglang_message="Abort sent to the engine.",
    ),
    audit=("rid", "abort_all"),
    engine=EngineStep(Kind.ABORT, AbortRequest),
)
LOAD: Final = ControlCommand[NoArgs, LoadReply | None](
    "load",
    NoArgs,
    LoadReply | None,
    "the engine's latest load report",
    http=Http("GET", "/api/load", "viewer"),
    cli=Cli("load", "show the engine's latest load report", render="load"),
)
FREEZE_GC: Final = ControlCommand[NoArgs, FreezeGcReply](
    "freeze_gc",
    NoArgs,
    FreezeGcReply,
    "freeze the garbage collector in the router, the engine, detokenizers and workers",
    mutates=True,
    http=Http("POST", "/api/freeze_gc", "operator"),
    cli=Cli(
        "freeze-gc",
        "freeze the garbage collector in the router, engine, detokenizers and workers "
        "(after warm-up)",
        render="freeze_gc",
    ),
    console=Console("engine", "Freeze GC"),
    engine=EngineStep(Kind.FREEZE_GC, FreezeGC),
)
FLUSH_CACHE: Final = ControlCommand[FlushCacheArgs, FlushCacheReply](
    "flush_cache",
    FlushCacheArgs,
    FlushCacheReply,
    "drop the engine's cache (llama.cpp: its KV cache); 409 naming the running requests "
    "while any runs and generation is not paused",
    mutates=True,
    http=Http(
        "POST",
        "/api/flush_cache",
        "operator",
        aliases=("/flush_cache",),
        sglang_message="Cache flushed.",
        sglang_methods=("GET",),
    ),
    cli=Cli("flush-cache", "drop the engine's cache (refused while requests run unpaused)"),
    console=Console(
        "engine",
        "Flush cache",
        confirm="Drop the engine's cache? Requests that follow prefill from scratch.",
    ),
    engine=EngineStep(Kind.ENGINE_COMMAND, FlushCacheArgs),
)
UPDATE_WEIGHTS: Final = ControlCommand[UpdateWeightsArgs, UpdateWeightsReply](
    "update_weights",
    UpdateWeightsArgs,
    UpdateWeightsReply,
    "swap the engine's weights under live traffic: pause in the mode, load, continue "
    "(a failed load keeps the old weights and resumes)",
    mutates=True,
    http=Http(
        "POST",
        "/api/update_weights",
        "operator",
        aliases=("/update_weights_from_disk",),
        renames={"model_path": "model", "weight_version": "version"},
        sglang_message="Succeeded to update model weights.",
    ),
    cli=Cli("update-weights", "load new weights into the engine through the pause barrier"),
    console=Console(
        "engine",
        "Update weights",
        confirm="Pause generation, load the new weights, and continue?",
    ),
    audit=("model", "version", "mode"),
    engine=EngineStep(Kind.ENGINE_COMMAND, UpdateWeightsArgs),
)
METRICS: Final = ControlCommand[NoArgs, TokenizerRouterMetrics](
    "metrics", NoArgs, TokenizerRouterMetrics, "state for Prometheus, read at scrape time"
)


def _admin(name: str, path: str, summary: str) -> ControlCommand[NoArgs, Any]:
    """A read the admin app answers itself (no router command behind it)."""
    return ControlCommand(
        name, NoArgs, Any, summary, http=Http("GET", path, "viewer"), served_by="admin"
    )


#: The admin app's own reads, in the order its docs list them.
ADMIN_COMMANDS: Final[tuple[ControlCommand[NoArgs, Any], ...]] = (
    _admin(
        "worker_stats",
        "/api/worker_stats",
        "each worker's requests, errors and latency over the last minute, from its metrics",
    ),
    _admin(
        "history",
        "/api/history",
        "the stack's requests/s, tokens/s and latency p50/p95 every 5 s over the last "
        "15 minutes (at most 180 samples, oldest first; ?after= for newer ones only)",
    ),
    _admin("events", "/api/events", "a server-sent event stream of changes"),
    _admin(
        "audit",
        "/api/audit",
        "the latest audit records of this admin app (who, what, result), newest first",
    ),
    _admin("whoami", "/api/whoami", "the token's name and role"),
    _admin("commands", "/api/commands", "this catalogue"),
)

#: Every command the tokenizer router serves, by name.
TOKENIZER_ROUTER_COMMANDS: Final[dict[str, ControlCommand[Any, Any]]] = {
    command.name: command
    for command in (
        STATUS,
        LIST_WORKERS,
        GET_WORKER,
        PAUSE,
        CONTINUE,
        DRAIN,
        UNDRAIN,
        ABORT,
        LOAD,
        FREEZE_GC,
        FLUSH_CACHE,
        UPDATE_WEIGHTS,
        METRICS,
    )
}

#: Every command people reach (an HTTP route), in the order the CLI's help lists them.
OPERATOR_COMMANDS: Final[tuple[ControlCommand[Any, Any], ...]] = (
    *(command for command in TOKENIZER_ROUTER_COMMANDS.values() if command.http is not None),
    *ADMIN_COMMANDS,
)

DETOK_STATUS: Final = ControlCommand[NoArgs, DetokenizerRouterStatus](
    "status",
    NoArgs,
    DetokenizerRouterStatus,
    "counters and backlogs",
    served_by="detokenizer_router",
)
DETOK_METRICS: Final = ControlCommand[NoArgs, RouterMetrics](
    "metrics",
    NoArgs,
    RouterMetrics,
    "state for Prometheus, read at scrape time",
    served_by="detokenizer_router",
)

#: Every command the detokenizer router serves, by name.
DETOKENIZER_ROUTER_COMMANDS: Final[dict[str, ControlCommand[Any, Any]]] = {
    command.name: command for command in (DETOK_STATUS, DETOK_METRICS)
}
