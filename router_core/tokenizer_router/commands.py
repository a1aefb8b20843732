"""The tokenizer router's control commands: one small handler each, in one table.

A handler takes the router's core, the command's parsed arguments (its
:class:`~router_core.control.commands.ControlCommand`'s struct), where to reply and the
time; it returns a :class:`Handled`: the reply (or ``DEFERRED`` when the barrier will
answer later) and the effects to carry out. Pure: the shell binds the table to its
control socket. Wire shapes are in ``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from router_core.control import commands as spec
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
from router_core.control.command_model import ControlCommand
from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.replies import AbortReply, FreezeGcReply
from router_core.control.table import DEFERRED, ReplyTo
from router_core.registry import WorkerRecord, WorkerState
from router_core.tokenizer_router.effects import Effect, FreezeGarbageCollector, Instant, Send
from router_core.traffic import BROADCAST
from router_core.wire import Kind, frame_message
from router_core.wire.control import ENGINE, DrainCommand, FreezeGC
from router_core.wire.requests import AbortRequest

if TYPE_CHECKING:
    from router_core.tokenizer_router.core import RouterCore

__all__ = ["COMMANDS", "CommandHandler", "Handled", "RouterCommand"]


@dataclass(frozen=True, slots=True)
class Handled:
    """A command's reply (``DEFERRED``: answered later) and the effects it asks for."""

    reply: Any
    effects: list[Effect] = field(default_factory=list)


#: ``handler(core, args, reply_to, at)``.
CommandHandler = Callable[["RouterCore", Any, ReplyTo, Instant], Handled]


@dataclass(frozen=True, slots=True)
class RouterCommand:
    """A command the router serves: its wire description and its handler."""

    command: ControlCommand[Any, Any]
    handler: CommandHandler


def _worker(core: RouterCore, worker_id: str) -> WorkerRecord:
    record = core.registry.get(worker_id)
    if record is None:
        raise ControlError(ErrorCode.NOT_FOUND, f"no worker {worker_id!r}")
    return record


def _drain_message(record: WorkerRecord, *, drain: bool) -> Effect:
    """Tell a worker to stop (or resume) admitting requests (route ``broadcast``)."""
    message = frame_message(Kind.DRAIN, DrainCommand(record.worker_id, drain))
    return Send(record.address, message, traffic=(BROADCAST, record.worker_id))


def list_workers(
    core: RouterCore, args: ListWorkersArgs, reply_to: ReplyTo, at: Instant
) -> Handled:
    """Every registered worker, then (with ``include_departed``) those that left lately."""
    return Handled(core.view.workers(at, include_departed=args.include_departed))


def get_worker(core: RouterCore, args: WorkerArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """One worker (registered, or departed lately and shown as ``dead``), or NOT_FOUND."""
    view = core.view.worker(args.worker_id, at)
    if view is None:
        raise ControlError(ErrorCode.NOT_FOUND, f"no worker {args.worker_id!r}")
    return Handled(view)


def pause(core: RouterCore, args: PauseArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Pause every live worker and the engine; answers when all acknowledged or at timeout."""
    op, effects = core.pause.start(
        is_pause=True, mode=args.mode, timeout_s=args.timeout_s, waiter=reply_to, at=at
    )
    effects.insert(0, core.persist())  # saved before the broadcast announces it
    return Handled(core.pause.outcome_of(op, at) if op.complete else DEFERRED, effects)


def continue_(core: RouterCore, args: ContinueArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Resume every live worker and the engine; same barrier as pause."""
    op, effects = core.pause.start(
        is_pause=False, mode=None, timeout_s=args.timeout_s, waiter=reply_to, at=at
    )
    effects.insert(0, core.persist())
    return Handled(core.pause.outcome_of(op, at) if op.complete else DEFERRED, effects)


def drain(core: RouterCore, args: WorkerArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Stop one worker admitting requests; it reports ``drained`` once empty."""
    record = _worker(core, args.worker_id)
    if not core.registry.command_drain(record):
        raise ControlError(ErrorCode.CONFLICT, f"{args.worker_id} is {record.state}")
    core.drain_marks.mark(record.worker_id)
    effects = [core.persist(), _drain_message(record, drain=True)]
    return Handled(record.view(at.mono, at.wall, core.registry.unresponsive_after_s), effects)


def undrain(core: RouterCore, args: WorkerArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Let a draining or drained worker admit requests again."""
    record = _worker(core, args.worker_id)
    resume: WorkerState = "paused" if core.pause.state.paused else "serving"
    if not core.registry.command_undrain(record, resume):
        raise ControlError(ErrorCode.CONFLICT, f"{args.worker_id} is {record.state}, not draining")
    core.drain_marks.unmark(record.worker_id)
    effects = [core.persist(), _drain_message(record, drain=False)]
    return Handled(record.view(at.mono, at.wall, core.registry.unresponsive_after_s), effects)


#: The ``reason`` of an abort an operator asked for: the finish reason's message.
OPERATOR_ABORT: Final = "aborted by an operator"


def abort(core: RouterCore, args: AbortArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Abort ``rid`` (or, with ``abort_all``, everything) in the engine, on behalf of every
    registered worker: the router does not know which one owns a request id, and the
    engine keys requests by (owner, rid), so it gets one ``ABORT`` per worker and finishes
    the request where it has it (an abort row to its owner); BAD_ARGUMENTS for neither."""
    if not args.abort_all and not args.rid:
        raise ControlError(ErrorCode.BAD_ARGUMENTS, "abort: give a rid, or abort_all true")
    rid = "" if args.abort_all else args.rid
    payload = AbortRequest(rid=rid, abort_all=args.abort_all, reason=OPERATOR_ABORT)
    records = core.registry.workers()
    effects: list[Effect] = [
        Send(
            ENGINE,
            frame_message(
                Kind.ABORT, payload, rids=[rid] if rid else [], reply_to=[record.address]
            ),
        )
        for record in records
    ]
    reply = AbortReply(
        rid=rid, abort_all=args.abort_all, sent_for=[record.worker_id for record in records]
    )
    return Handled(reply, effects)


def load(core: RouterCore, args: NoArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """The engine's latest load snapshot and its age, or None before the first one."""
    return Handled(core.view.load(at))


def freeze_gc(core: RouterCore, args: NoArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Freeze GC in the router and ask the engine (and through it the detokenizers)."""
    message = frame_message(Kind.FREEZE_GC, FreezeGC(reason="control"))
    reply = FreezeGcReply(frozen=["tokenizer_router"], forwarded_to=["engine"])
    return Handled(reply, [FreezeGarbageCollector(), Send(ENGINE, message)])


def flush_cache(core: RouterCore, args: FlushCacheArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Ask the engine to drop its cache; answered when it has (or refused: 409 while
    requests run unpaused, naming them). ENGINE_FAILED at once when no engine is live."""
    if not core.engine.is_live(at.mono):
        raise ControlError(ErrorCode.ENGINE_FAILED, "flush_cache: no engine is live")
    return Handled(DEFERRED, core.engine_requests.start(spec.FLUSH_CACHE, args, reply_to, at))


def update_weights(
    core: RouterCore, args: UpdateWeightsArgs, reply_to: ReplyTo, at: Instant
) -> Handled:
    """Pause, have the engine load new weights, continue: answered after the last step
    (:mod:`router_core.tokenizer_router.weight_updates`)."""
    return Handled(DEFERRED, core.weights.start(args, reply_to, at))


def status(core: RouterCore, args: NoArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Counters, registry summary, pause state, backlogs and the weights serving."""
    status = core.view.status(at)
    weights = core.weights
    return Handled(
        msgspec.structs.replace(status, weight_version=weights.version, weight_model=weights.model)
    )


def metrics(core: RouterCore, args: NoArgs, reply_to: ReplyTo, at: Instant) -> Handled:
    """Traffic, histograms, workers, pause and engine state for the admin app's /metrics."""
    return Handled(core.view.metrics(at))


COMMANDS: Final[Mapping[str, RouterCommand]] = {
    entry.command.name: entry
    for entry in (
        RouterCommand(spec.LIST_WORKERS, list_workers),
        RouterCommand(spec.GET_WORKER, get_worker),
        RouterCommand(spec.PAUSE, pause),
        RouterCommand(spec.CONTINUE, continue_),
        RouterCommand(spec.DRAIN, drain),
        RouterCommand(spec.UNDRAIN, undrain),
        RouterCommand(spec.ABORT, abort),
        RouterCommand(spec.LOAD, load),
        RouterCommand(spec.FREEZE_GC, freeze_gc),
        RouterCommand(spec.FLUSH_CACHE, flush_cache),
        RouterCommand(spec.UPDATE_WEIGHTS, update_weights),
        RouterCommand(spec.STATUS, status),
        RouterCommand(spec.METRICS, metrics),
    )
}
