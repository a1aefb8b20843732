"""The router's control replies (plain dicts, ``docs/protocol.md`` 6.4) as API models.

Pure: tested with literal dicts. A live worker hides a departed entry with the same id
(a restarted worker registers again under its old id), and of several departed entries
with one id only the latest is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.catalogue import Command
from app.models import (
    CommandArgument,
    CommandConsole,
    CommandInfo,
    CommandList,
    EngineInfo,
    Load,
    Operation,
    RouterInfo,
    Status,
    Versions,
    Worker,
)

__all__ = ["commands_of", "load_of", "operation_of", "status_of", "worker_of", "workers_of"]


def worker_of(view: Mapping[str, Any]) -> Worker:
    """One router worker view as a :class:`Worker`."""
    return Worker(
        id=view["worker_id"],
        state=view["state"],
        pid=view["pid"],
        host=view["host"],
        endpoint=view["address"],
        version=view["version"],
        registered_at=view["registered_at"],
        last_heartbeat_at=view["last_heartbeat_at"],
        last_heartbeat_s_ago=view["last_seen_s_ago"],
        inflight=view["inflight"],
        requests_sent=view["requests_sent"],
        rows_received=view["rows_received"],
        safe_to_delete=view["safe_to_delete"],
        departure_reason=view.get("departure_reason"),
    )


def workers_of(views: Iterable[Mapping[str, Any]]) -> list[Worker]:
    """``list_workers(include_departed=True)`` as workers, one per id, in the router's order."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for view in views:
        worker_id = view["worker_id"]
        held = chosen.get(worker_id)
        if held is None or _newer(view, held):
            chosen[worker_id] = view
    return [worker_of(view) for view in chosen.values()]


def _newer(candidate: Mapping[str, Any], held: Mapping[str, Any]) -> bool:
    """Whether ``candidate`` should replace ``held`` (same id): live beats departed, and
    of two departures the more recent one wins."""
    if held["state"] != "dead":
        return False
    if candidate["state"] != "dead":
        return True
    return float(candidate.get("departed_s_ago", 0.0)) < float(held.get("departed_s_ago", 0.0))


def load_of(reply: Mapping[str, Any] | None) -> Load | None:
    """The router's ``load`` reply (None before the engine's first report)."""
    if reply is None:
        return None
    return Load(
        running=reply.get("running", 0),
        waiting=reply.get("waiting", 0),
        max_running=reply.get("max_running", 0),
        token_usage=reply.get("token_usage", 0.0),
        step=reply.get("step", 0),
        taken_ns=reply.get("taken_ns", 0),
        age_s=reply.get("age_s", 0.0),
    )


def operation_of(outcome: Mapping[str, Any]) -> Operation:
    """A barrier outcome (a ``pause``/``continue`` reply or a recent operation)."""
    return Operation(
        op_id=outcome["op_id"],
        seq=outcome["seq"],
        action=outcome["action"],
        mode=outcome.get("mode"),
        complete=outcome["complete"],
        acked=list(outcome.get("acked", ())),
        stragglers=list(outcome.get("stragglers", ())),
        departed=list(outcome.get("departed", ())),
        elapsed_s=outcome.get("elapsed_s", 0.0),
        finished_at=outcome.get("finished_at", 0.0),
    )


def status_of(status: Mapping[str, Any], load: Mapping[str, Any] | None, admin: str) -> Status:
    """The router's ``status`` and ``load`` replies, and the admin app's version."""
    return Status(
        paused=status["paused"],
        pause_mode=status.get("pause_mode"),
        pause_state_since=status["pause_state_since"],
        recent_operations=[operation_of(op) for op in status.get("recent_operations", ())],
        engine=EngineInfo(live=bool(status.get("engine_live")), load=load_of(load)),
        workers=dict(status.get("workers", {})),
        versions=Versions(admin=admin, router=str(status.get("version", ""))),
        router=RouterInfo(pid=status["pid"], uptime_s=status["uptime_s"]),
    )


def _command_info(entry: Command) -> CommandInfo:
    console = entry.console
    return CommandInfo(
        name=entry.name,
        method=entry.method,
        path=entry.path,
        aliases=list(entry.aliases),
        role=entry.role,
        audited=entry.audited,
        summary=entry.summary,
        arguments=[
            CommandArgument(
                name=argument.name,
                place=argument.place,
                summary=argument.summary,
                choices=list(argument.choices),
                default=argument.default,
            )
            for argument in entry.arguments
        ],
        cli=entry.cli.name if entry.cli is not None else None,
        console=None
        if console is None
        else CommandConsole(scope=console.scope, label=console.label, states=list(console.states)),
    )


def commands_of(entries: Iterable[Command]) -> CommandList:
    """The catalogue's ``entries`` as ``GET /api/commands`` answers them."""
    return CommandList(commands=[_command_info(entry) for entry in entries])
