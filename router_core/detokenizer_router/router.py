"""The detokenizer router: engine outputs -> N detokenizers, sticky per worker.

Batches are split per destination detokenizer, one message each (rows grouped, never
decoded); freeze-GC and idle batches go to every detokenizer. With a state file, the
worker assignment is saved as it grows and restored by a restart
(:mod:`~router_core.detokenizer_router.assignment_file`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Final

import zmq

from router_core import tracing
from router_core.beacon import IncarnationBeacon
from router_core.control.commands import DETOK_METRICS, DETOK_STATUS, Command, NoArgs, ReplyTo
from router_core.control.guard import OPEN_CONTROL, ControlGuard
from router_core.control.replies import DetokenizerRouterStatus, RouterMetrics
from router_core.control.server import ControlServer
from router_core.counters import Counters
from router_core.destinations import Destination
from router_core.detokenizer_router.assignment_file import AssignmentFile
from router_core.detokenizer_router.picker import DetokenizerPicker
from router_core.detokenizer_router.settings import DetokenizerRouterSettings
from router_core.inbound import drain
from router_core.loop import LoopResources, PollLoop
from router_core.traffic import DETOKENIZE, TrafficStats, fabric_metrics
from router_core.transport import FrameLike
from router_core.wire import BATCH_KINDS, Header, Kind
from router_core.wire.regroup import regroup

__all__ = ["COMMANDS", "DetokenizerRouter"]

logger = logging.getLogger(__name__)

_BROADCAST_KINDS: Final = frozenset({Kind.FREEZE_GC, Kind.IDLE})

#: The span of routing one batch (role-based name, see docs/observability.md).
ROUTE_SPAN: Final = "detokenizer-router route_batch"


class DetokenizerRouter:
    """Runs in one thread: :meth:`run` binds, loops until stopped, and closes.

    The control socket is guarded by ``control_guard`` (default: ``settings.key``, no
    audit log); a given guard must hold that same key.
    """

    def __init__(
        self,
        settings: DetokenizerRouterSettings,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        *,
        control_guard: ControlGuard | None = None,
    ) -> None:
        self.settings = settings
        self._context = context
        self._control_guard = control_guard or ControlGuard(
            key=settings.key, role="detokenizer_router"
        )
        self.counters = Counters()
        #: Traffic on route ``detokenize`` is keyed by the rows' owner *address*: this
        #: router has no registry; the admin app maps addresses to worker ids.
        self.traffic = TrafficStats()
        count = len(settings.endpoints.detokenizers)
        self._state_file = (
            None
            if settings.state_file is None
            else AssignmentFile(Path(settings.state_file), count)
        )
        restored = {} if self._state_file is None else self._state_file.load()
        self.picker = DetokenizerPicker(count, settings.sticky_key, restored)
        self.started_at = time.monotonic()
        self._loop = PollLoop()
        self._targets: list[Destination] = []
        #: This incarnation, told to the tokenizer router each second (when it has one).
        self._beacon = IncarnationBeacon("detokenizer-router", key=settings.key)
        self._beacon_to: Destination | None = None

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Bind, serve until stopped, then drain and close everything."""
        endpoints = self.settings.endpoints
        with LoopResources(self.settings, self.counters, self._context) as resources:
            destinations = resources.destinations()
            self._targets = [destinations.get(e) for e in endpoints.detokenizers]
            if self.settings.router_workers is not None:
                self._beacon_to = destinations.get("router-workers", self.settings.router_workers)
            inbound = resources.bind(zmq.PULL, endpoints.inbound)
            control_sock = resources.bind(zmq.ROUTER, endpoints.control)
            control = ControlServer(
                control_sock, self, COMMANDS, self.counters, self._control_guard
            )
            self._loop.watch(inbound, lambda: drain(inbound, self._route, self.counters))
            self._loop.watch(control_sock, control.handle_ready)
            if self._control_guard.key is None:
                logger.warning(OPEN_CONTROL, endpoints.control)
            logger.info(
                "detokenizer router serving in pid %d (%d worker assignments restored)",
                os.getpid(),
                len(self.picker.assignments()),
            )
            self._loop.run(resources.backlogged, self._tick)

    def _tick(self, now: float) -> float | None:
        """Say this incarnation to the tokenizer router when due."""
        if self._beacon_to is None:
            return None
        beacon = self._beacon.due(now)
        if beacon is not None and not self._beacon_to.backlog and self._beacon_to.send(beacon):
            self.counters.add("beacons", "sent")
        return self._beacon.next_due()

    def _route(self, header: Header, frames: list[FrameLike]) -> None:
        kind = header.kind
        if kind in _BROADCAST_KINDS:
            for target in self._targets:
                target.send(frames)
            self.counters.add("broadcast", kind.name.lower())
            return
        if kind not in BATCH_KINDS:
            self.counters.add("rejected", "unexpected_kind")
            return
        self.traffic.observe_hop(DETOKENIZE, header.sent_ns)
        self.traffic.split_rows.observe(DETOKENIZE, len(header.rids))
        with tracing.batch_span_if_traced(ROUTE_SPAN, header.row_traces):
            self._route_batch(header, frames)
        if self.picker.changed:
            self._save_assignment()

    def _save_assignment(self) -> None:
        """Save a grown assignment; a failure is logged and counted, routing goes on."""
        if not self.picker.take_changed() or self._state_file is None:
            return
        try:
            self._state_file.save(self.picker.assignments())
        except OSError as exc:
            logger.error("detokenizer router state file not saved: %s", exc)
            self.counters.add("state_file_errors", "save")

    def _route_batch(self, header: Header, frames: list[FrameLike]) -> None:
        """One message per detokenizer, counted per owning worker's address."""
        for index, rows in self.picker.group(header.rids, header.reply_to).items():
            if not self._targets[index].send(regroup(header, frames, rows)):
                continue
            self.counters.add("routed_rows", f"detokenizer-{index}", len(rows))
            sizes: dict[str, int] = {}
            for row in rows:
                owner = header.reply_to[row]
                sizes[owner] = sizes.get(owner, 0) + len(frames[row + 1])
            for owner, nbytes in sizes.items():
                self.traffic.add(DETOKENIZE, owner, 1, nbytes)

    def metrics(self) -> RouterMetrics:
        """Traffic (keyed by owner address), drops, rejects and histograms, for ``metrics``."""
        return fabric_metrics(
            "detokenizer_router",
            self.traffic,
            self.counters,
            backlog_messages=sum(len(t.backlog) for t in self._targets),
        )

    def status(self) -> DetokenizerRouterStatus:
        """Counters and backlogs, for ``status``."""
        return DetokenizerRouterStatus(
            role="detokenizer_router",
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - self.started_at, 3),
            detokenizers=len(self._targets),
            sticky_key=self.picker.key,
            workers_per_detokenizer=_workers_per_detokenizer(self.picker),
            counters=self.counters.snapshot(),
            backlogs={t.endpoint: len(t.backlog) for t in self._targets},
        )


def _status(router: DetokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    return router.status()


def _metrics(router: DetokenizerRouter, args: NoArgs, reply_to: ReplyTo) -> Any:
    return router.metrics()


COMMANDS: Final[dict[str, Command[DetokenizerRouter]]] = {
    DETOK_STATUS.name: Command.serving(DETOK_STATUS, _status),
    DETOK_METRICS.name: Command.serving(DETOK_METRICS, _metrics),
}


def _workers_per_detokenizer(picker: DetokenizerPicker) -> list[int] | None:
    """How many workers each detokenizer serves (None when not sticky per worker)."""
    if picker.key != "worker":
        return None
    counts = [0] * picker.count
    for index in picker.assignments().values():
        counts[index] += 1
    return counts
