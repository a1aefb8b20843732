"""The tokenizer router as its control replies show it: read-only, built on request.

Nothing here changes or counts anything: the registry, the pause coordinator, the
engine state, the counters and the traffic already hold the state, and each reply
(``status``, ``metrics``, ``load``, worker views) is read from them when asked.
``backlogs`` is the shell's probe of what waits in its destinations' queues.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final, get_args

import msgspec

from router_core.control.replies import (
    EngineMetrics,
    LoadReply,
    RouterStatus,
    TokenizerRouterMetrics,
    WorkerMetricsRow,
    WorkerState,
    WorkerView,
)
from router_core.counters import Counters
from router_core.registry import WorkerRegistry
from router_core.tokenizer_router.effects import Instant
from router_core.tokenizer_router.engine_events import EngineState
from router_core.tokenizer_router.pause import PauseCoordinator
from router_core.traffic import TrafficStats, fabric_metrics, histograms_of
from router_core.version import package_version

__all__ = ["WORKER_STATES", "RouterView"]

#: Every worker state, so ``workers_by_state`` reports zeros too.
WORKER_STATES: Final[tuple[str, ...]] = get_args(WorkerState)


class RouterView:
    """Builds the router's read-only replies from its state."""

    def __init__(
        self,
        *,
        registry: WorkerRegistry,
        pause: PauseCoordinator,
        engine: EngineState,
        counters: Counters,
        traffic: TrafficStats,
        backlogs: Callable[[], dict[str, int]],
        started: Instant,
    ) -> None:
        self._registry = registry
        self._pause = pause
        self._engine = engine
        self._counters = counters
        self._traffic = traffic
        self._backlogs = backlogs
        self._started = started

    def workers(self, at: Instant, *, include_departed: bool = False) -> list[WorkerView]:
        """Every registered worker, then (with ``include_departed``) those that left lately."""
        views = [
            record.view(at.mono, at.wall, self._registry.unresponsive_after_s)
            for record in self._registry.workers()
        ]
        if include_departed:
            views += [d.view(at.mono, at.wall) for d in self._registry.departed(at.mono)]
        return views

    def worker(self, worker_id: str, at: Instant) -> WorkerView | None:
        """One worker, registered or departed lately (``dead``); None if neither."""
        record = self._registry.get(worker_id)
        if record is not None:
            return record.view(at.mono, at.wall, self._registry.unresponsive_after_s)
        for departure in self._registry.departed(at.mono):
            if departure.record.worker_id == worker_id:
                return departure.view(at.mono, at.wall)
        return None

    def load(self, at: Instant) -> LoadReply | None:
        """The engine's latest load snapshot, every field, and its age; None before one."""
        latest, received = self._engine.latest_load, self._engine.load_received_at
        if latest is None or received is None:
            return None
        fields = msgspec.structs.asdict(latest)
        del fields["secret"]  # never kept, and never shown
        return LoadReply(**fields, age_s=round(at.mono - received, 3))

    def status(self, at: Instant) -> RouterStatus:
        """Counters, registry summary, pause state and backlogs, for ``status``."""
        states: dict[str, int] = {}
        for record in self._registry.workers():
            shown = record.shown_state(at.mono, self._registry.unresponsive_after_s)
            states[shown] = states.get(shown, 0) + 1
        state = self._pause.state
        return RouterStatus(
            role="tokenizer_router",
            pid=os.getpid(),
            uptime_s=round(at.mono - self._started.mono, 3),
            paused=state.paused,
            pause_mode=state.mode,
            last_op_id=state.op_id,
            last_op_seq=state.seq,
            pause_state_since=self._pause.state_since_wall(),
            pending_operations=len(self._pause.pending),
            recent_operations=list(self._pause.recent),
            version=package_version(),
            workers=states,
            engine_live=self._engine.is_live(at.mono),
            counters=self._counters.snapshot(),
            backlogs=self._backlogs(),
        )

    def metrics(self, at: Instant) -> TokenizerRouterMetrics:
        """Traffic, drops, rejects, histograms, workers, pause state and engine load."""
        live = self.workers(at)
        departed = [d.view(at.mono, at.wall) for d in self._registry.departed(at.mono)]
        rows = [_worker_row(view, up=1) for view in live]
        rows += [_worker_row(view, up=0) for view in departed]
        by_state = dict.fromkeys(WORKER_STATES, 0)
        for row in rows:
            by_state[row.state] += 1
        fabric = fabric_metrics(
            "tokenizer_router",
            self._traffic,
            self._counters,
            backlog_messages=sum(self._backlogs().values()),
        )
        fabric.histograms["pause_barrier_seconds"] = histograms_of(self._pause.barrier_time)
        return TokenizerRouterMetrics(
            **msgspec.structs.asdict(fabric),
            workers=rows,
            workers_by_state=by_state,
            paused=self._pause.state.paused,
            pause_state_since_unix_s=self._pause.state_since_wall(),
            pause_operations=self._pause.finished_counts(),
            engine=self._engine_metrics(at),
        )

    def _engine_metrics(self, at: Instant) -> EngineMetrics:
        load = self._engine.latest_load
        return EngineMetrics(
            up=self._engine.is_live(at.mono),
            running=0 if load is None else load.running,
            waiting=0 if load is None else load.waiting,
            max_running=0 if load is None else load.max_running,
            token_usage=0.0 if load is None else load.token_usage,
        )


def _worker_row(view: WorkerView, *, up: int) -> WorkerMetricsRow:
    return WorkerMetricsRow(
        worker=view.worker_id,
        address=view.address,
        state=view.state,
        up=up,
        last_heartbeat_unix_s=view.last_heartbeat_at,
        in_flight=view.inflight,
        host=view.host,
    )
