"""The router's control replies (the structs of :mod:`router_core.control.replies`,
``docs/protocol.md`` 6.4), and the command catalogue, as API models.

Pure. A live worker hides a departed entry with the same id (a restarted worker
registers again under its old id), and of several departed entries with one id only the
latest is kept. Workers are listed in :func:`worker_order`, whatever order the router
holds them in (it changes when a worker registers again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, get_args

from app.catalogue import Command
from app.models import (
    AbortResult,
    CommandArgument,
    CommandConsole,
    CommandInfo,
    CommandList,
    EngineInfo,
    FreezeGcResult,
    Load,
    Operation,
    RouterInfo,
    Status,
    Versions,
    Worker,
    WorkerState,
)
from router_core.control.replies import (
    AbortReply,
    FreezeGcReply,
    LoadReply,
    OperationOutcome,
    RouterStatus,
    WorkerView,
)

__all__ = [
    "abort_of",
    "commands_of",
    "freeze_gc_of",
    "load_of",
    "operation_of",
    "status_of",
    "worker_of",
    "worker_order",
    "workers_of",
]


def worker_of(view: WorkerView) -> Worker:
    """One router worker view as a :class:`Worker`."""
    return Worker(
        id=view.worker_id,
        state=view.state,
        pid=view.pid,
        host=view.host,
        endpoint=view.address,
        version=view.version,
        registered_at=view.registered_at,
        last_heartbeat_at=view.last_heartbeat_at,
        last_heartbeat_s_ago=view.last_seen_s_ago,
        inflight=view.inflight,
        requests_sent=view.requests_sent,
        rows_received=view.rows_received,
        safe_to_delete=view.safe_to_delete,
        departure_reason=view.departure_reason,
    )


_DIGITS = re.compile(r"(\d+)")


def worker_order(worker_id: str) -> tuple[tuple[str | int, ...], str]:
    """The sort key of a worker id: its runs of digits compared as numbers (``w2`` before
    ``w10``), then the id itself, so that no two ids tie (``w01``, ``w1``)."""
    runs = _DIGITS.split(worker_id)
    # Text and digit runs alternate, text first: items at one index are of one type.
    return tuple(int(run) if index % 2 else run for index, run in enumerate(runs)), worker_id


def workers_of(views: Iterable[WorkerView]) -> list[Worker]:
    """``list_workers(include_departed=True)`` as workers, one per id, in
    :func:`worker_order` of their ids."""
    chosen: dict[str, WorkerView] = {}
    for view in views:
        held = chosen.get(view.worker_id)
        if held is None or _newer(view, held):
            chosen[view.worker_id] = view
    return [worker_of(chosen[worker_id]) for worker_id in sorted(chosen, key=worker_order)]


def _newer(candidate: WorkerView, held: WorkerView) -> bool:
    """Whether ``candidate`` should replace ``held`` (same id): live beats departed, and
    of two departures the more recent one wins."""
    if held.state != "dead":
        return False
    if candidate.state != "dead":
        return True
    return (candidate.departed_s_ago or 0.0) < (held.departed_s_ago or 0.0)


def load_of(reply: LoadReply | None) -> Load | None:
    """The router's ``load`` reply (None before the engine's first report)."""
    if reply is None:
        return None
    return Load(
        running=reply.running,
        waiting=reply.waiting,
        max_running=reply.max_running,
        token_usage=reply.token_usage,
        step=reply.step,
        taken_ns=reply.taken_ns,
        age_s=reply.age_s,
        kv_cells_used=reply.kv_cells_used,
        kv_cells_total=reply.kv_cells_total,
        tokens_per_s=reply.tokens_per_s,
        context_length=reply.context_length,
        engine_started_ns=reply.engine_started_ns,
        features=list(reply.features),
        weight_version=reply.weight_version,
    )


def operation_of(outcome: OperationOutcome) -> Operation:
    """A barrier outcome (a ``pause``/``continue`` reply or a recent operation)."""
    return Operation(
        op_id=outcome.op_id,
        seq=outcome.seq,
        action=outcome.action,
        mode=outcome.mode,
        complete=outcome.complete,
        acked=list(outcome.acked),
        stragglers=list(outcome.stragglers),
        departed=list(outcome.departed),
        elapsed_s=outcome.elapsed_s,
        finished_at=outcome.finished_at,
    )


def status_of(status: RouterStatus, load: LoadReply | None, admin: str) -> Status:
    """The router's ``status`` and ``load`` replies, and the admin app's version."""
    return Status(
        paused=status.paused,
        pause_mode=status.pause_mode,
        pause_state_since=status.pause_state_since,
        recent_operations=[operation_of(op) for op in status.recent_operations],
        engine=EngineInfo(live=status.engine_live, load=load_of(load)),
        workers=_by_state(status.workers),
        versions=Versions(admin=admin, router=status.version),
        router=RouterInfo(pid=status.pid, uptime_s=status.uptime_s),
    )


#: The worker states in the order of a worker's life, as status lists its counts.
_STATES: Final = get_args(WorkerState)


def _by_state(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` keyed in :data:`_STATES` order, a state it does not know last."""
    known = [state for state in _STATES if state in counts]
    return {state: counts[state] for state in [*known, *sorted(set(counts) - set(known))]}


def abort_of(reply: AbortReply) -> AbortResult:
    """The router's ``abort`` reply: the request, and the workers it was aborted for."""
    return AbortResult(rid=reply.rid, abort_all=reply.abort_all, sent_for=list(reply.sent_for))


def freeze_gc_of(reply: FreezeGcReply) -> FreezeGcResult:
    """The router's ``freeze_gc`` reply: who froze, and who was asked to."""
    return FreezeGcResult(frozen=list(reply.frozen), forwarded_to=list(reply.forwarded_to))


def _command_info(entry: Command) -> CommandInfo:
    console = entry.console
    return CommandInfo(
        name=entry.name,
        method=entry.method,
        path=entry.path,
        aliases=list(entry.aliases),
        role=entry.role,
        audited=entry.audited,
        barrier=entry.barrier,
        engine=entry.engine is not None,
        summary=entry.summary,
        arguments=[
            CommandArgument(
                name=argument.name,
                place=argument.place,
                summary=argument.summary,
                choices=list(argument.choices),
                default=argument.default,
                type=argument.type,
                required=argument.required,
            )
            for argument in entry.arguments
        ],
        cli=entry.cli.name if entry.cli is not None else None,
        console=None
        if console is None
        else CommandConsole(
            scope=console.scope,
            label=console.label,
            confirm=console.confirm,
            states=list(console.states),
        ),
    )


def commands_of(entries: Iterable[Command]) -> CommandList:
    """The catalogue's ``entries`` as ``GET /api/commands`` answers them."""
    return CommandList(commands=[_command_info(entry) for entry in entries])
