"""The admin API's answers as it describes them (a Worker, an Operation, a Load, a Status),
at a fixed NOW, for the operator commands' render and command tests."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["LOAD", "NOW", "operation", "status", "worker"]

NOW = time.mktime((2026, 3, 4, 12, 0, 0, 0, 0, -1))


def worker(worker_id: str = "w0", **fields: Any) -> dict[str, Any]:
    """A Worker as the admin API describes it."""
    base: dict[str, Any] = {
        "id": worker_id,
        "state": "serving",
        "pid": 4242,
        "host": "box",
        "endpoint": f"ipc:///tmp/sb/worker-{worker_id}",
        "version": "0.1.0",
        "registered_at": NOW - 100,
        "last_heartbeat_at": NOW - 0.4,
        "last_heartbeat_s_ago": 0.4,
        "inflight": 3,
        "requests_sent": 120,
        "rows_received": 900,
        "safe_to_delete": False,
        "departure_reason": None,
    }
    return {**base, **fields}


def operation(**fields: Any) -> dict[str, Any]:
    """An Operation as the admin API describes it."""
    base: dict[str, Any] = {
        "op_id": "op-7",
        "seq": 7,
        "action": "pause",
        "mode": "in_place",
        "complete": True,
        "acked": ["engine", "w0", "w1"],
        "stragglers": [],
        "departed": [],
        "elapsed_s": 0.0123,
        "finished_at": NOW - 5,
    }
    return {**base, **fields}


LOAD = {
    "running": 3,
    "waiting": 1,
    "max_running": 256,
    "token_usage": 0.125,
    "step": 1234,
    "taken_ns": 1,
    "age_s": 0.05,
}


def status(**fields: Any) -> dict[str, Any]:
    """A Status as the admin API describes it."""
    base: dict[str, Any] = {
        "paused": False,
        "pause_mode": None,
        "pause_state_since": NOW - 65,
        "recent_operations": [],
        "engine": {"live": True, "load": LOAD},
        "workers": {"serving": 2, "draining": 1},
        "versions": {"admin": "0.1.0", "router": "0.1.0"},
        "router": {"pid": 99, "uptime_s": 3725.0},
    }
    return {**base, **fields}
