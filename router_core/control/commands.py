"""The routers' control commands as data: name, argument struct and reply type of each.

One :class:`ControlCommand` per command is shared by the router that serves it (its
table binds a handler to it) and by every client that calls it
(:meth:`ControlClient.request` decodes the reply as ``reply_type``), so the two ends
cannot disagree about a shape. Pure: no sockets. Wire shapes: ``docs/protocol.md`` 6.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, TypeVar

import msgspec

from router_core.control.replies import (
    AbortReply,
    DetokenizerRouterStatus,
    FreezeGcReply,
    LoadReply,
    OperationOutcome,
    RouterMetrics,
    RouterStatus,
    TokenizerRouterMetrics,
    WorkerView,
)
from router_core.limits import MAX_BARRIER_TIMEOUT_S, MAX_RID_CHARS
from router_core.wire.control import PauseMode

__all__ = [
    "ABORT",
    "CONTINUE",
    "DEFERRED",
    "DETOKENIZER_ROUTER_COMMANDS",
    "DETOK_METRICS",
    "DETOK_STATUS",
    "DRAIN",
    "FREEZE_GC",
    "GET_WORKER",
    "LIST_WORKERS",
    "LOAD",
    "METRICS",
    "PAUSE",
    "STATUS",
    "TOKENIZER_ROUTER_COMMANDS",
    "UNDRAIN",
    "AbortArgs",
    "AuditedCall",
    "Command",
    "ContinueArgs",
    "ControlCommand",
    "ListWorkersArgs",
    "NoArgs",
    "PauseArgs",
    "ReplyTo",
    "WorkerArgs",
]

ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)
ReplyT = TypeVar("ReplyT")
StateT = TypeVar("StateT")

#: Seconds a barrier may wait: ``0 < timeout_s <= MAX_BARRIER_TIMEOUT_S`` (600).
Timeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_BARRIER_TIMEOUT_S)]


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class ListWorkersArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"include_departed": bool}``: also list workers that left recently, as ``dead``."""

    include_departed: bool = False


class WorkerArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"worker_id": str}``."""

    worker_id: str


class PauseArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"mode": "abort"|"retract"|"in_place", "timeout_s": float}``."""

    mode: PauseMode = "abort"
    timeout_s: Timeout | None = None


class AbortArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"rid": str, "abort_all": bool}``: one request by its id, or with ``abort_all``
    every request in the engine (``rid`` is then ignored)."""

    rid: Annotated[str, msgspec.Meta(max_length=MAX_RID_CHARS)] = ""
    abort_all: bool = False


class ContinueArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"timeout_s": float}``."""

    timeout_s: Timeout | None = None


@dataclass(frozen=True)
class ControlCommand(Generic[ArgsT, ReplyT]):
    """One command: its name, its argument struct and the type its result decodes as.

    ``reply_type`` is what ``msgspec.convert`` turns the result into (``ReplyT``; a
    generic alias such as ``list[WorkerView]`` is fine). ``mutates`` marks a command
    that changes the stack (pause, drain, ...): the server writes an audit line for
    each run of it.
    """

    name: str
    args_type: type[ArgsT]
    reply_type: Any
    summary: str
    mutates: bool = False


@dataclass(frozen=True)
class AuditedCall:
    """A mutation being run, as its audit lines name it: who asked (their own claim),
    the command and its arguments in one short text."""

    actor: str
    command: str
    args: str


@dataclass(frozen=True)
class ReplyTo:
    """Where a reply goes: the ROUTER envelope and the request id; ``audited`` when the
    request is a mutation whose answer is audited too (a barrier answered later)."""

    envelope: tuple[bytes, ...]
    request_id: int
    audited: AuditedCall | None = None


#: Returned by a handler that will answer later (a barrier waiting for acknowledgements).
DEFERRED: Final = object()


@dataclass(frozen=True)
class Command(Generic[StateT]):
    """A server's table entry: the handler for one command, its argument struct, a summary.

    ``handler(state, args, reply_to)`` returns the result, or :data:`DEFERRED`;
    ``mutates`` as in :class:`ControlCommand`.
    """

    handler: Callable[[StateT, Any, ReplyTo], Any]
    args_type: type[msgspec.Struct]
    summary: str
    mutates: bool = False

    @classmethod
    def serving(
        cls, command: ControlCommand[Any, Any], handler: Callable[[StateT, Any, ReplyTo], Any]
    ) -> Command[StateT]:
        """The entry that serves ``command`` with ``handler``."""
        return cls(handler, command.args_type, command.summary, command.mutates)


LIST_WORKERS: Final = ControlCommand[ListWorkersArgs, list[WorkerView]](
    "list_workers", ListWorkersArgs, list[WorkerView], "every registered worker"
)
GET_WORKER: Final = ControlCommand[WorkerArgs, WorkerView](
    "get_worker", WorkerArgs, WorkerView, "one worker by id"
)
PAUSE: Final = ControlCommand[PauseArgs, OperationOutcome](
    "pause", PauseArgs, OperationOutcome, "pause generation (barrier)", mutates=True
)
CONTINUE: Final = ControlCommand[ContinueArgs, OperationOutcome](
    "continue", ContinueArgs, OperationOutcome, "resume generation (barrier)", mutates=True
)
DRAIN: Final = ControlCommand[WorkerArgs, WorkerView](
    "drain", WorkerArgs, WorkerView, "stop one worker admitting requests", mutates=True
)
UNDRAIN: Final = ControlCommand[WorkerArgs, WorkerView](
    "undrain", WorkerArgs, WorkerView, "let a drained worker admit again", mutates=True
)
LOAD: Final = ControlCommand[NoArgs, LoadReply | None](
    "load", NoArgs, LoadReply | None, "the engine's latest load snapshot"
)
ABORT: Final = ControlCommand[AbortArgs, AbortReply](
    "abort", AbortArgs, AbortReply, "abort one request, or all, in the engine", mutates=True
)
FREEZE_GC: Final = ControlCommand[NoArgs, FreezeGcReply](
    "freeze_gc", NoArgs, FreezeGcReply, "freeze GC in router, engine, detokenizers", mutates=True
)
STATUS: Final = ControlCommand[NoArgs, RouterStatus](
    "status", NoArgs, RouterStatus, "counters, registry summary, pause state"
)
METRICS: Final = ControlCommand[NoArgs, TokenizerRouterMetrics](
    "metrics", NoArgs, TokenizerRouterMetrics, "state for Prometheus, read at scrape time"
)

#: Every command the tokenizer router serves, by name.
TOKENIZER_ROUTER_COMMANDS: Final[dict[str, ControlCommand[Any, Any]]] = {
    command.name: command
    for command in (
        LIST_WORKERS,
        GET_WORKER,
        PAUSE,
        CONTINUE,
        DRAIN,
        UNDRAIN,
        ABORT,
        LOAD,
        FREEZE_GC,
        STATUS,
        METRICS,
    )
}

DETOK_STATUS: Final = ControlCommand[NoArgs, DetokenizerRouterStatus](
    "status", NoArgs, DetokenizerRouterStatus, "counters and backlogs"
)
DETOK_METRICS: Final = ControlCommand[NoArgs, RouterMetrics](
    "metrics", NoArgs, RouterMetrics, "state for Prometheus, read at scrape time"
)

#: Every command the detokenizer router serves, by name.
DETOKENIZER_ROUTER_COMMANDS: Final[dict[str, ControlCommand[Any, Any]]] = {
    command.name: command for command in (DETOK_STATUS, DETOK_METRICS)
}
