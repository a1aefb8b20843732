"""The tokenizer router's control commands: one small handler each, in one table.

Each handler takes the router, its parsed arguments and where to reply, and returns the
result (or ``DEFERRED`` when the barrier will answer later). Wire shapes are in
``docs/protocol.md``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

import msgspec

from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.server import DEFERRED, Command, ReplyTo
from router_core.registry import WorkerRecord, WorkerState
from router_core.tokenizer_router.metrics import metrics_snapshot
from router_core.tokenizer_router.router import TokenizerRouter
from router_core.wire.control import PauseMode

__all__ = ["COMMANDS"]

Timeout = Annotated[float, msgspec.Meta(gt=0, le=600)]


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


class ContinueArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"timeout_s": float}``."""

    timeout_s: Timeout | None = None


def _worker(router: TokenizerRouter, worker_id: str) -> WorkerRecord:
    record = router.registry.get(worker_id)
    if record is None:
        raise ControlError(ErrorCode.NOT_FOUND, f"no worker {worker_id!r}")
    return record


def list_workers(router: TokenizerRouter, args: ListWorkersArgs, reply_to: ReplyTo) -> Any:
    """Every registered worker, then (with ``include_departed``) those that left lately."""
    now, wall = time.monotonic(), time.time()
    views = [record.view(now, wall) for record in router.registry.workers()]
    if args.include_departed:
        views.extend(departure.view(now, wall) for departure in router.registry.departed(now))
    return views


def get_worker(router: TokenizerRouter, args: WorkerArgs, reply_to: ReplyTo) -> Any:
    """One worker (registered, or departed lately and shown as ``dead``), or NOT_FOUND."""
    now, wall = time.monotonic(), time.time()
    record = router.registry.get(args.worker_id)
    if record is not None:
        return record.view(now, wall)
    for departure in router.registry.departed(now):
        if departure.record.worker_id == args.worker_id:
            return departure.view(now, wall)
    raise ControlError(ErrorCode.NOT_FOUND, f"no worker {args.worker_id!r}")


def pause(router: TokenizerRouter, args: PauseArgs, reply_to: ReplyTo) -> Any:
    """Pause every live worker and the engine; answers when all acknowledged or at timeout."""
    op = router.start_pause_operation(
        is_pause=True, mode=args.mode, timeout_s=args.timeout_s, waiter=reply_to
    )
    return router.outcome_of(op) if op.complete else DEFERRED


def continue_(router: TokenizerRouter, args: ContinueArgs, reply_to: ReplyTo) -> Any:
    """Resume every live worker and the engine; same barrier as pause."""
    op = router.start_pause_operation(
        is_pause=False, mode=None, timeout_s=args.timeout_s, waiter=reply_to
    )
    return router.outcome_of(op) if op.complete else DEFERRED


def drain(router: TokenizerRouter, args: WorkerArgs, reply_to: ReplyTo) -> Any:
    """Stop one worker admitting requests; it reports ``drained`` once empty."""
    record = _worker(router, args.worker_id)
    if not router.registry.command_drain(record):
        raise ControlError(ErrorCode.CONFLICT, f"{args.worker_id} is {record.state}")
    router.send_drain(record, drain=True)
    return record.view(time.monotonic(), time.time())


def undrain(router: TokenizerRouter, args: WorkerArgs, reply_to: ReplyTo) -> Any:
    """Let a draining or drained worker admit requests again."""
    record = _worker(router, args.worker_id)
    resume: WorkerState = "paused" if router.barrier.state.paused else "serving"
    if not router.registry.command_undrain(record, resume):
        raise ControlError(ErrorCode.CONFLICT, f"{args.worker_id} is {record.state}, not draining")
    router.send_drain(record, drain=False)
    return record.view(time.monotonic(), time.time())


def load(router: TokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    """The engine's latest load snapshot and its age, or None before the first one."""
    if router.latest_load is None or router.load_received_at is None:
        return None
    return {
        # Every field, zeros included: to_builtins would omit the defaults.
        **msgspec.structs.asdict(router.latest_load),
        "age_s": round(time.monotonic() - router.load_received_at, 3),
    }


def freeze_gc(router: TokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    """Freeze GC in the router and ask the engine (and through it the detokenizers)."""
    router.freeze_gc()
    return {"frozen": ["tokenizer_router"], "forwarded_to": ["engine"]}


def status(router: TokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    """Counters, registry summary, pause state and backlogs."""
    return router.status()


def metrics(router: TokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    """Traffic, histograms, workers, pause and engine state for the admin app's /metrics."""
    return metrics_snapshot(router)


COMMANDS: Final[dict[str, Command[TokenizerRouter]]] = {
    "list_workers": Command(list_workers, ListWorkersArgs, "every registered worker"),
    "get_worker": Command(get_worker, WorkerArgs, "one worker by id"),
    "pause": Command(pause, PauseArgs, "pause generation (barrier)"),
    "continue": Command(continue_, ContinueArgs, "resume generation (barrier)"),
    "drain": Command(drain, WorkerArgs, "stop one worker admitting requests"),
    "undrain": Command(undrain, WorkerArgs, "let a drained worker admit again"),
    "load": Command(load, NoArgs, "the engine's latest load snapshot"),
    "freeze_gc": Command(freeze_gc, NoArgs, "freeze GC in router, engine, detokenizers"),
    "status": Command(status, NoArgs, "counters, registry summary, pause state"),
    "metrics": Command(metrics, NoArgs, "state for Prometheus, read at scrape time"),
}
