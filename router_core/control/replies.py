"""What the routers' control commands answer, as typed structs (``docs/protocol.md`` 6.4).

Pure data, shared by the routers that build these replies and by every reader of them
(the admin app's views and metrics, the CLI). Each struct encodes to exactly the map the
protocol documents: fields without a default are always present (``None`` included), and
the few fields with a default are omitted while they hold it (a live worker has no
``departure_reason``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from router_core.wire.control import PauseMode

__all__ = [
    "AbortReply",
    "DetokenizerRouterStatus",
    "EngineMetrics",
    "FlushCacheReply",
    "FreezeGcReply",
    "HistogramSnapshot",
    "LoadReply",
    "OperationOutcome",
    "OperationResult",
    "PauseAction",
    "PauseOperationCount",
    "RouterMetrics",
    "RouterStatus",
    "TokenizerRouterMetrics",
    "TrafficRow",
    "UpdateWeightsReply",
    "WeightsLoaded",
    "WorkerMetricsRow",
    "WorkerState",
    "WorkerView",
]

#: A worker's state in the router's registry; ``dead`` only for a departed worker.
#: ``unresponsive``: registered, but silent for more than half the heartbeat timeout
#: (shown, never stored: the next heartbeat ends it, the timeout makes it ``dead``).
WorkerState = Literal[
    "starting", "serving", "paused", "draining", "drained", "unresponsive", "dead"
]

#: What a barrier operation does.
PauseAction = Literal["pause", "continue"]

#: How a barrier operation ended.
OperationResult = Literal["complete", "timeout"]


class WorkerView(
    msgspec.Struct,
    kw_only=True,
    omit_defaults=True,
    rename={"worker_id": "id", "address": "endpoint", "last_seen_s_ago": "last_heartbeat_s_ago"},
):
    """One worker as ``list_workers`` and ``get_worker`` show it, under the admin API's
    field names (``id``, ``endpoint``, ``last_heartbeat_s_ago``: ``switchboard ctl
    list_workers`` and ``GET /api/workers`` spell every field alike).

    Times ending in ``_at`` are Unix seconds; ``*_s_ago`` are seconds before the reply.
    A departed worker is shown in state ``dead`` with why and how long ago it left.
    """

    worker_id: str
    address: str
    pid: int
    host: str
    version: str
    started_ns: int
    state: WorkerState
    inflight: int
    heartbeats: int
    last_seen_s_ago: float
    registered_at: float
    last_heartbeat_at: float
    requests_sent: int
    rows_received: int
    safe_to_delete: bool
    #: Departed workers only: ``deregistered``, ``dead_worker`` or ``replaced``.
    departure_reason: str | None = None
    departed_s_ago: float | None = None


class OperationOutcome(msgspec.Struct, kw_only=True):
    """How one pause or continue ended: who acknowledged, and (after a timeout) who did not."""

    op_id: str
    seq: int
    action: PauseAction
    mode: PauseMode | None
    complete: bool
    acked: list[str]
    stragglers: list[str]
    departed: list[str]
    elapsed_s: float
    #: Unix seconds.
    finished_at: float


class RouterStatus(msgspec.Struct, kw_only=True):
    """The tokenizer router's ``status``: pause state, registry summary, counters, backlogs."""

    role: Literal["tokenizer_router"]
    pid: int
    uptime_s: float
    paused: bool
    pause_mode: PauseMode | None
    last_op_id: str
    last_op_seq: int
    #: Unix seconds the pause state last changed (the router's start before any change).
    pause_state_since: float
    pending_operations: int
    #: The latest finished operations, oldest first.
    recent_operations: list[OperationOutcome]
    version: str
    #: Registered workers by state.
    workers: dict[str, int]
    engine_live: bool
    counters: dict[str, dict[str, int]]
    #: Queued messages per destination (worker addresses and ``engine``).
    backlogs: dict[str, int]
    #: The weights serving: the version the last update loaded, and its file ("" before
    #: any update: the engine's own).
    weight_version: str = ""
    weight_model: str = ""


class DetokenizerRouterStatus(msgspec.Struct, kw_only=True):
    """The detokenizer router's ``status``."""

    role: Literal["detokenizer_router"]
    pid: int
    uptime_s: float
    detokenizers: int
    sticky_key: str
    #: Workers served by each detokenizer (None unless sticky per worker).
    workers_per_detokenizer: list[int] | None
    counters: dict[str, dict[str, int]]
    #: Queued messages per detokenizer endpoint.
    backlogs: dict[str, int]


class LoadReply(msgspec.Struct, kw_only=True):
    """``load``: every field of the engine's latest load snapshot, and its age."""

    running: int
    waiting: int
    max_running: int
    token_usage: float
    step: int
    taken_ns: int
    engine_started_ns: int
    kv_cells_used: int = 0
    kv_cells_total: int = 0
    tokens_per_s: float = 0.0
    context_length: int = 0
    features: list[str] = msgspec.field(default_factory=list)
    #: The version of the weights serving ("": the engine's own, never updated).
    weight_version: str = ""
    #: Seconds since the router received the snapshot.
    age_s: float


class AbortReply(msgspec.Struct, kw_only=True):
    """``abort``: what was asked, and the workers on whose behalf the engine was told.

    The router does not know which worker owns a request id, so the engine is sent one
    abort per registered worker (``sent_for``, their ids); it aborts the request where
    it has it and ignores the others. Nothing says whether ``rid`` was in flight.
    """

    rid: str
    abort_all: bool
    sent_for: list[str]


class FreezeGcReply(msgspec.Struct, kw_only=True):
    """``freeze_gc``: the processes that froze, and those asked to."""

    frozen: list[str]
    forwarded_to: list[str]


class FlushCacheReply(msgspec.Struct, kw_only=True):
    """``flush_cache``: the engine dropped its cache; ``dropped_tokens`` is how many
    tokens' worth of cache it held (0: it keeps no cache, or it was empty)."""

    flushed: bool = True
    dropped_tokens: int = 0


class WeightsLoaded(msgspec.Struct, kw_only=True):
    """What an engine answers ``update_weights`` with: the version and file now serving."""

    version: str
    model: str = ""


class UpdateWeightsReply(msgspec.Struct, kw_only=True):
    """``update_weights``: the weights now serving (``version``, loaded from ``model``),
    those before, and the barrier's two operations (``resumed`` is None when generation
    was paused before and stays paused)."""

    version: str
    model: str
    previous_version: str
    paused: OperationOutcome
    resumed: OperationOutcome | None
    elapsed_s: float


class HistogramSnapshot(msgspec.Struct):
    """Cumulative buckets ``[[le, count], ..., ["+Inf", count]]``, their sum and count."""

    buckets: list[tuple[float | str, int]]
    sum: float
    count: int


class TrafficRow(msgspec.Struct):
    """Messages and bytes on one route to or from one peer (a worker id, or for the
    detokenizer router a return address)."""

    route: str
    worker: str
    messages: int
    bytes: int


class RouterMetrics(msgspec.Struct, kw_only=True):
    """What both routers' ``metrics`` replies hold: traffic, drops, rejects, histograms."""

    process: str
    pid: int
    traffic: list[TrafficRow]
    dropped: dict[str, int]
    rejected: dict[str, int]
    #: Histogram family key -> label value -> histogram.
    histograms: dict[str, dict[str, HistogramSnapshot]]
    backlog_messages: int
    #: The router process's user plus system CPU seconds, and resident memory in bytes.
    #: Default 0: a router that predates them, or cannot read them.
    cpu_seconds: float = 0.0
    resident_bytes: int = 0


class WorkerMetricsRow(msgspec.Struct, kw_only=True):
    """One worker in the tokenizer router's ``metrics``: live (``up`` 1) or departed (0)."""

    worker: str
    address: str
    state: WorkerState
    up: int
    last_heartbeat_unix_s: float
    in_flight: int
    #: The host the worker registered from ("" from a router that predates it).
    host: str = ""


class PauseOperationCount(msgspec.Struct, kw_only=True):
    """Finished pause/continue operations of one kind and outcome."""

    operation: PauseAction
    mode: str
    result: OperationResult
    count: int


class EngineMetrics(msgspec.Struct, kw_only=True):
    """The engine's liveness and latest load (zeros before the first snapshot)."""

    up: bool
    running: int
    waiting: int
    max_running: int
    token_usage: float


class TokenizerRouterMetrics(RouterMetrics, kw_only=True):
    """The tokenizer router's ``metrics``: the shared part plus registry, pause and engine."""

    workers: list[WorkerMetricsRow]
    workers_by_state: dict[str, int]
    paused: bool
    pause_state_since_unix_s: float
    pause_operations: list[PauseOperationCount]
    #: Always sent by Switchboard's router; ``nil`` is read as an engine that is down.
    engine: EngineMetrics | None
