"""Router replies for the views and events tests: worker views, status and load replies, and
the admin app's models made from them."""

from __future__ import annotations

from typing import Any

import msgspec

from app.models import Status, Worker
from app.views import status_of, workers_of
from router_core.control.replies import LoadReply, RouterStatus, WorkerView

__all__ = ["load_reply", "status", "view", "worker"]


def view(worker_id: str, state: str = "serving", **changes: Any) -> WorkerView:
    """A router worker view (``list_workers``) with ``changes``."""
    fields = {
        "id": worker_id,
        "endpoint": f"ipc:///tmp/sb/worker-{worker_id}",
        "pid": 100,
        "host": "h",
        "version": "1",
        "started_ns": 1,
        "state": state,
        "inflight": 0,
        "heartbeats": 3,
        "last_heartbeat_s_ago": 0.1,
        "registered_at": 1000.0,
        "last_heartbeat_at": 1010.0,
        "requests_sent": 0,
        "rows_received": 0,
        "safe_to_delete": False,
        **changes,
    }
    return msgspec.convert(fields, WorkerView)


def worker(worker_id: str, state: str = "serving", **changes: Any) -> Worker:
    return workers_of([view(worker_id, state, **changes)])[0]


def status(paused: bool = False, ops: tuple[str, ...] = (), **changes: Any) -> Status:
    """A Status from a router ``status`` reply with ``changes``."""
    operations = [
        {
            "op_id": op_id,
            "seq": seq,
            "action": "pause",
            "mode": "abort",
            "complete": True,
            "acked": ["engine"],
            "stragglers": [],
            "departed": [],
            "elapsed_s": 0.01,
            "finished_at": 1.0,
        }
        for seq, op_id in enumerate(ops, start=1)
    ]
    load = changes.pop("load", None)
    reply = {
        "role": "tokenizer_router",
        "pid": 7,
        "uptime_s": 5.0,
        "last_op_id": ops[-1] if ops else "",
        "last_op_seq": len(ops),
        "pending_operations": 0,
        "counters": {},
        "backlogs": {},
        "paused": paused,
        "pause_mode": "abort" if paused else None,
        "pause_state_since": 100.0,
        "recent_operations": operations,
        "version": "1",
        "workers": {"serving": 2},
        "engine_live": True,
        **changes,
    }
    return status_of(msgspec.convert(reply, RouterStatus), load_reply(load), "1")


def load_reply(fields: dict[str, Any] | None) -> LoadReply | None:
    """A router ``load`` reply: ``fields`` over zeros (None: no report yet)."""
    if fields is None:
        return None
    zeros = {"running": 0, "waiting": 0, "max_running": 0, "token_usage": 0.0, "step": 0}
    zeros |= {"taken_ns": 0, "engine_started_ns": 0, "age_s": 0.0}
    return msgspec.convert(zeros | fields, LoadReply)
