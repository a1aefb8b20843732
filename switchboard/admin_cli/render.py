"""Readable text for the admin API's answers: aligned tables and ``key  value`` blocks.

Pure functions of the typed answers (:mod:`switchboard.admin_cli.answers`, and ``now``
where a clock time is shown as an age), so every layout is tested without a server.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from switchboard.admin_cli.answers import FreezeGcResult, Load, Operation, Status, Worker

__all__ = [
    "ago",
    "clock",
    "elapsed",
    "freeze_gc_text",
    "key_values",
    "load_text",
    "names",
    "operation_text",
    "status_text",
    "table",
    "worker_states",
    "workers_table",
]

#: Worker states in lifecycle order, for counts and summaries.
STATE_ORDER = ("starting", "serving", "paused", "draining", "drained", "unresponsive", "dead")
#: Beyond this many acknowledgements an operations table names a few and counts the rest.
ACKED_SHOWN = 4


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[int] = ()) -> str:
    """Columns two spaces apart, headers first; the columns in ``right`` right-aligned."""
    grid = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    flush_right = set(right)
    lines = []
    for row in grid:
        cells = [
            cell.rjust(width) if i in flush_right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def key_values(pairs: Iterable[tuple[str, str]]) -> str:
    """``key  value`` lines with the values aligned."""
    listed = list(pairs)
    width = max((len(key) for key, _ in listed), default=0)
    return "\n".join(f"{key.ljust(width)}  {value}".rstrip() for key, value in listed)


def ago(seconds: float | None) -> str:
    """A duration for people: ``0.4s``, ``3m05s``, ``2h10m``, ``3d04h``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{max(seconds, 0.0):.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def elapsed(seconds: float | None) -> str:
    """A barrier's duration, to the millisecond."""
    return "-" if seconds is None else f"{seconds:.3f}s"


def clock(unix: float | None, now: float) -> str:
    """Local time of day of ``unix``, with the date when it is not today's."""
    if unix is None:
        return "-"
    when, today = time.localtime(unix), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M:%S", when)
    return time.strftime("%Y-%m-%d %H:%M:%S", when)


def names(items: Sequence[str] | None, shown: int | None = None) -> str:
    """``a, b, c``; past ``shown`` names, ``a, b, +3 more``; ``-`` for none."""
    if not items:
        return "-"
    if shown is None or len(items) <= shown:
        return ", ".join(items)
    return ", ".join([*items[:shown], f"+{len(items) - shown} more"])


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def workers_table(workers: Sequence[Worker]) -> str:
    """One row per worker; a REASON column only when a departed worker has one."""
    if not workers:
        return "no workers"
    headers = ["ID", "STATE", "INFLIGHT", "LAST HEARTBEAT", "REQUESTS", "SAFE TO DELETE"]
    rows = [
        [
            worker.id,
            worker.state,
            _count(worker.inflight),
            "-"
            if worker.last_heartbeat_s_ago is None
            else f"{ago(worker.last_heartbeat_s_ago)} ago",
            _count(worker.requests_sent),
            _yes_no(worker.safe_to_delete),
        ]
        for worker in workers
    ]
    if any(worker.departure_reason for worker in workers):
        headers.append("REASON")
        for row, worker in zip(rows, workers, strict=True):
            row.append(worker.departure_reason or "")
    return table(headers, rows, right=(2, 4))


def worker_states(counts: Mapping[str, int]) -> str:
    """``2 serving, 1 draining`` in lifecycle order; ``none`` when empty."""
    order = [state for state in STATE_ORDER if state in counts]
    order += sorted(set(counts) - set(STATE_ORDER))
    listed = [f"{counts[state]} {state}" for state in order if counts[state]]
    return ", ".join(listed) or "none"


def _load_summary(load: Load | None) -> str:
    if load is None:
        return "no load report yet"
    return (
        f"running {load.running} of {load.max_running}, waiting {load.waiting}, "
        f"token usage {load.token_usage:.0%}, step {load.step}"
    )


def _operations_table(operations: Sequence[Operation], now: float) -> str:
    rows = [
        [
            _count(op.seq),
            op.action,
            op.mode or "-",
            "complete" if op.complete else "TIMED OUT",
            elapsed(op.elapsed_s),
            clock(op.finished_at, now),
            names(op.acked, ACKED_SHOWN),
            names(op.stragglers),
        ]
        for op in operations
    ]
    headers = ["SEQ", "ACTION", "MODE", "RESULT", "ELAPSED", "FINISHED", "ACKED", "STRAGGLERS"]
    return table(headers, rows, right=(0, 4))


def status_text(status: Status, now: float) -> str:
    """Pause state, engine, workers by state, versions, then the recent operations."""
    since = status.pause_state_since
    when = f"since {clock(since, now)} ({ago(now - since)} ago)" if since else ""
    engine = status.engine
    engine_line = "live" if engine.live else "NOT CONNECTED"
    if engine.live or engine.load is not None:
        engine_line += f"; {_load_summary(engine.load)}"
    pairs = [
        ("paused", f"{'YES' if status.paused else 'no'}, {when}".rstrip(", ")),
        ("mode", status.pause_mode or "-"),
        ("engine", engine_line),
        ("workers", worker_states(status.workers)),
    ]
    if status.versions:
        listed = ", ".join(f"{k} {v}" for k, v in sorted(status.versions.items()))
        pairs.append(("versions", listed))
    if status.router is not None:
        router = status.router
        pairs.append(("router", f"pid {_count(router.pid)}, up {ago(router.uptime_s)}"))
    if not status.recent_operations:
        return key_values(pairs) + "\n\nrecent operations: none"
    return (
        key_values(pairs)
        + "\n\nrecent operations (newest last)\n"
        + _operations_table(status.recent_operations, now)
    )


def operation_text(op: Operation) -> str:
    """A pause or continue outcome: the result line, then who acknowledged and who not."""
    action = op.action
    if op.mode:
        action += f" ({op.mode})"
    if op.complete:
        result = f"complete in {elapsed(op.elapsed_s)}"
    else:
        result = f"TIMED OUT after {elapsed(op.elapsed_s)}"
    pairs = [
        ("acked", names(op.acked)),
        ("stragglers", names(op.stragglers)),
        ("departed", names(op.departed)),
    ]
    seq = f" (seq {op.seq})" if op.seq is not None else ""
    return f"{action}: {result}{seq}\n" + key_values(pairs)


def load_text(load: Load | None) -> str:
    """The engine's latest load snapshot, or a line saying there is none yet."""
    if load is None:
        return "the engine has not reported its load yet"
    return key_values(
        [
            ("running", f"{load.running} of {load.max_running}"),
            ("waiting", str(load.waiting)),
            ("token usage", f"{load.token_usage:.1%}"),
            ("step", str(load.step)),
            ("reported", f"{ago(load.age_s)} ago"),
        ]
    )


def freeze_gc_text(result: FreezeGcResult) -> str:
    """Who froze its garbage collector, and who was asked to."""
    return key_values(
        [("frozen", names(result.frozen)), ("forwarded to", names(result.forwarded_to))]
    )
