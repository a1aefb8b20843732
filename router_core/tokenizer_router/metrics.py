"""The tokenizer router's ``metrics`` reply: its state, read at scrape time.

Nothing here counts anything: the registry, the barrier, the load snapshot and the
router's counters already hold the state, and the admin app turns this plain-data
snapshot into Prometheus families (``docs/metrics.md``) on every scrape.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final, get_args

from router_core.control.replies import WorkerView
from router_core.registry import WorkerState
from router_core.traffic import router_metrics

if TYPE_CHECKING:
    from router_core.tokenizer_router.router import TokenizerRouter

__all__ = ["WORKER_STATES", "metrics_snapshot"]

#: Every worker state, so ``workers_by_state`` reports zeros too.
WORKER_STATES: Final[tuple[str, ...]] = get_args(WorkerState)


def metrics_snapshot(router: TokenizerRouter) -> dict[str, Any]:
    """Traffic, drops, rejects, histograms, workers, pause state and engine load."""
    now, wall_now = time.monotonic(), time.time()
    registry = router.registry
    workers = [_worker_row(record.view(now, wall_now), up=1) for record in registry.workers()]
    workers += [
        _worker_row(departure.view(now, wall_now), up=0) for departure in registry.departed(now)
    ]
    by_state = dict.fromkeys(WORKER_STATES, 0)
    for row in workers:
        by_state[row["state"]] += 1
    assert router.workers is not None and router.engine is not None
    backlog = sum(router.workers.backlog_sizes().values()) + len(router.engine.backlog)
    common = router_metrics("tokenizer_router", router.traffic, router.counters)
    common["histograms"]["pause_barrier_seconds"] = router.barrier_time.snapshot()
    return {
        **common,
        "backlog_messages": backlog,
        "workers": workers,
        "workers_by_state": by_state,
        "paused": router.barrier.state.paused,
        "pause_state_since_unix_s": round(router.pause_state_since or router.started_wall, 3),
        "pause_operations": [
            {"operation": operation, "mode": mode, "result": result, "count": count}
            for (operation, mode, result), count in sorted(router.finished_operations.items())
        ],
        "engine": _engine(router, now),
    }


def _worker_row(view: WorkerView, *, up: int) -> dict[str, Any]:
    return {
        "worker": view.worker_id,
        "address": view.address,
        "state": view.state,
        "up": up,
        "last_heartbeat_unix_s": view.last_heartbeat_at,
        "in_flight": view.inflight,
    }


def _engine(router: TokenizerRouter, now: float) -> dict[str, Any]:
    load = router.latest_load
    return {
        "up": router.engine_is_live(now),
        "running": 0 if load is None else load.running,
        "waiting": 0 if load is None else load.waiting,
        "max_running": 0 if load is None else load.max_running,
        "token_usage": 0.0 if load is None else load.token_usage,
    }
