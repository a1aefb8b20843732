"""Control payloads: registration, liveness, the pause barrier, load and GC."""

from __future__ import annotations

from typing import Final, Literal, get_args

import msgspec

__all__ = [
    "ENGINE",
    "PAUSE_MODES",
    "REASON_BAD_KEY",
    "REASON_UNKNOWN_WORKER",
    "Acknowledgement",
    "ContinueRequest",
    "Deregistration",
    "DrainCommand",
    "FreezeGC",
    "Heartbeat",
    "LoadSnapshot",
    "OpOrder",
    "PauseContinueBroadcast",
    "PauseMode",
    "PauseRequest",
    "RegistrationReply",
    "UpstreamIncarnation",
    "WorkerRegistration",
    "WorkerReportedState",
    "op_order",
]

#: The engine's name as a barrier participant: the ``participant`` of its acknowledgements.
ENGINE: Final = "engine"

#: ``RegistrationReply.reason`` of a refusal to a worker the router does not know (it
#: restarted, or declared the worker dead): register again at once.
REASON_UNKNOWN_WORKER: Final = "unknown worker; register"
#: ``RegistrationReply.reason`` of a registration refused for want of the stack key.
REASON_BAD_KEY: Final = "bad_key"

#: ``abort``: in-flight requests end with finish reason abort; ``retract``: running
#: requests go back to the waiting queue; ``in_place``: freeze and keep all state.
#: Written here once: every other list of the modes is read from it.
PauseMode = Literal["abort", "retract", "in_place"]
#: The pause modes, in the order people are offered them.
PAUSE_MODES: Final[tuple[str, ...]] = get_args(PauseMode)

#: An operation's place in the total order of pause/continue operations:
#: ``(router incarnation, sequence number)``.
OpOrder = tuple[int, int]


def op_order(op_id: str) -> OpOrder | None:
    """Where operation ``op_id`` (``<incarnation>-<seq>``, both decimal) stands in the order
    of operations, or None for an id without that shape (applied without ordering).

    A router's incarnation grows with each start, so every operation of a newer router
    comes after every operation of an older one, whatever their sequence numbers.
    """
    head, dash, tail = op_id.rpartition("-")
    if not dash or not (head.isascii() and head.isdigit() and tail.isascii() and tail.isdigit()):
        return None
    return int(head), int(tail)


#: What a worker says about itself in a heartbeat.
WorkerReportedState = Literal["starting", "serving", "paused", "draining", "drained"]


class WorkerRegistration(msgspec.Struct, omit_defaults=True):
    """A worker announces itself; sent again at will (registration is idempotent).

    ``address`` is the endpoint the worker binds a PULL socket on for everything the
    router and the detokenizers send it; it is also the worker's identity on the wire.
    ``worker_id`` follows :data:`router_core.identifiers.WORKER_ID_RULE`. ``key`` is the
    stack key (:mod:`router_core.credentials`): a router that has one refuses a
    registration without it.
    """

    worker_id: str
    address: str
    pid: int = 0
    host: str = ""
    version: str = ""
    started_ns: int = 0
    key: str = ""


class RegistrationReply(msgspec.Struct, omit_defaults=True):
    """The router's answer to a registration, carrying the pause state to start in.

    ``op_id`` is the operation that set that state (possibly one of an earlier router
    incarnation, restored from the run directory); ``incarnation`` is the replying
    router's own (0 from a router that predates incarnations). A worker takes the state
    of a newer incarnation whatever its ``op_id``.

    ``secret`` (accepted replies) is new for each accepted registration: the worker puts
    it in every heartbeat, acknowledgement and deregistration it sends from then on, and
    the router refuses those that do not carry it.
    """

    worker_id: str
    accepted: bool
    paused: bool = False
    pause_mode: PauseMode | None = None
    op_id: str = ""
    heartbeat_interval_s: float = 1.0
    reason: str = ""
    incarnation: int = 0
    secret: str = ""


class Heartbeat(msgspec.Struct, omit_defaults=True):
    """Proof of life plus the worker's own view of its state."""

    worker_id: str
    seq: int = 0
    state: WorkerReportedState = "serving"
    inflight: int = 0
    #: The worker's return address, so a router that does not know the worker (it
    #: restarted) can ask it to register again.
    address: str = ""
    #: Requests this worker has sent since it started (generate and embed).
    requests_sent: int = 0
    #: Output rows this worker has received since it started.
    rows_received: int = 0
    #: The secret of the worker's registration (``RegistrationReply.secret``).
    secret: str = ""


class Deregistration(msgspec.Struct, omit_defaults=True):
    """A worker leaves cleanly; the router forgets it and closes its socket."""

    worker_id: str
    reason: str = "shutdown"
    #: The secret of the worker's registration (``RegistrationReply.secret``).
    secret: str = ""


class DrainCommand(msgspec.Struct, omit_defaults=True):
    """Router -> worker: stop (``drain=True``) or resume (``False``) admitting requests."""

    worker_id: str
    drain: bool = True


class PauseRequest(msgspec.Struct, omit_defaults=True):
    """Router -> engine: pause generation in ``mode``; acknowledge with ``op_id``."""

    op_id: str
    mode: PauseMode = "abort"


class ContinueRequest(msgspec.Struct, omit_defaults=True):
    """Router -> engine: resume generation; acknowledge with ``op_id``."""

    op_id: str


class PauseContinueBroadcast(msgspec.Struct, omit_defaults=True):
    """Router -> every live worker: set the pause state, then acknowledge ``op_id``."""

    op_id: str
    is_pause: bool
    mode: PauseMode | None = None


class Acknowledgement(msgspec.Struct, omit_defaults=True):
    """Worker or engine -> router: operation ``op_id`` has been applied by ``participant``.

    ``participant`` is a worker id, or ``"engine"``. ``secret`` is a worker's registration
    secret (``RegistrationReply.secret``), or the engine's stack key.
    """

    op_id: str
    participant: str
    secret: str = ""


class UpstreamIncarnation(msgspec.Struct, omit_defaults=True):
    """A process on the output path and its incarnation (its start, Unix ns).

    ``process`` is ``detokenizer-router`` or ``detokenizer-<j>``. Each sends its own to
    the tokenizer router about once a second; the router passes a new one (a first
    sighting or a restart) on to every worker, and every one it knows to a worker that
    registers. A worker that sees a process's incarnation grow knows that the rows the
    old one held are gone: a request that then gets no more output ends (``rows_lost``).

    ``key`` is the stack key; a router that has one refuses a beacon without it, and
    passes beacons on to the workers without it.
    """

    process: str
    incarnation: int
    key: str = ""


class FreezeGC(msgspec.Struct, omit_defaults=True):
    """Freeze the garbage collector (``gc.freeze()``) in every process that gets it."""

    reason: str = ""


class LoadSnapshot(msgspec.Struct, omit_defaults=True):
    """Engine -> router: the engine's latest load; the router keeps the newest one."""

    running: int = 0
    waiting: int = 0
    max_running: int = 0
    token_usage: float = 0.0
    step: int = 0
    taken_ns: int = 0
    #: KV cache cells in use and in all (0 for an engine without a KV cache).
    kv_cells_used: int = 0
    kv_cells_total: int = 0
    #: Tokens processed per second (prefill and decode) over the last load interval.
    tokens_per_s: float = 0.0
    #: The most tokens (prompt plus output) one request may hold: workers refuse a
    #: request that cannot fit (0: the engine sets no limit).
    context_length: int = 0
    #: When this engine incarnation started (Unix ns). A change tells the workers that
    #: the engine restarted, so their requests in flight in it are lost.
    engine_started_ns: int = 0
    #: What the engine honours beyond the sampling every engine takes, so workers refuse
    #: (400) a request for what is missing instead of answering without it. Known:
    #: ``logprobs`` (output rows carry ``output_token_logprobs_*``, and
    #: ``output_top_logprobs_*`` for a request's ``top_logprobs_num``).
    features: list[str] = []
    #: The stack key, from the engine; a router that has one refuses a snapshot without
    #: it, and passes snapshots on to the workers without it.
    secret: str = ""
    #: The version of the weights the engine serves ("": its own, never updated).
    weight_version: str = ""
