"""The detokenizer router's shell: sockets, the poll loop and time around its core.

Engine outputs -> N detokenizers, sticky per worker. What goes where is decided by
:class:`~router_core.detokenizer_router.core.DetokenizerRouterCore` (batches split per
destination detokenizer, rows grouped, never decoded; freeze-GC and idle to every
detokenizer): each inbound message is validated, handed with the time to the core, and
the effects it returns are carried out here, in order, inside one route span when the
batch is traced: sends (counted once sent), saving the worker assignment as it grows
(restored by a restart, :mod:`~router_core.detokenizer_router.assignment_file`), and
the incarnation beacon.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import zmq

from router_core import tracing
from router_core.beacon import IncarnationBeacon
from router_core.control.command_args import NoArgs
from router_core.control.commands import DETOK_METRICS, DETOK_STATUS
from router_core.control.curve_socket import open_control_curve
from router_core.control.guard import OPEN_CONTROL, ControlGuard
from router_core.control.replies import DetokenizerRouterStatus, RouterMetrics
from router_core.control.server import ControlServer
from router_core.control.table import Command, ReplyTo
from router_core.destinations import Destination
from router_core.detokenizer_router.assignment_file import AssignmentFile
from router_core.detokenizer_router.core import DetokenizerRouterCore
from router_core.detokenizer_router.effects import Beacon, Effect, Instant, SaveAssignment, Send
from router_core.detokenizer_router.settings import DetokenizerRouterSettings
from router_core.inbound import drain
from router_core.loop import LoopResources, PollLoop
from router_core.traffic import DETOKENIZE, fabric_metrics
from router_core.transport import FrameLike
from router_core.wire import Header

__all__ = ["COMMANDS", "DetokenizerRouter"]

logger = logging.getLogger(__name__)

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
        count = len(settings.endpoints.detokenizers)
        self._state_file = (
            None
            if settings.state_file is None
            else AssignmentFile(Path(settings.state_file), count)
        )
        restored = {} if self._state_file is None else self._state_file.load()
        self.core = DetokenizerRouterCore(
            count,
            settings.sticky_key,
            assigned=restored,
            # This incarnation, told to the tokenizer router each second (when it has one).
            beacon=None
            if settings.router_workers is None
            else IncarnationBeacon("detokenizer-router", key=settings.key),
        )
        #: The core's state, read by ``status`` and ``metrics``.
        self.counters = self.core.counters
        self.traffic = self.core.traffic
        self.picker = self.core.picker
        self.started_at = time.monotonic()
        self._loop = PollLoop()
        self._targets: list[Destination] = []
        self._beacon_to: Destination | None = None
        self._appliers: Mapping[type[Any], Callable[[Any], None]] = {
            Send: self._send,
            SaveAssignment: self._save_assignment,
            Beacon: self._send_beacon,
        }

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Bind, serve until stopped, then drain and close everything."""
        endpoints = self.settings.endpoints
        with (
            LoopResources(self.settings, self.counters, self._context) as resources,
            contextlib.ExitStack() as stack,
        ):
            destinations = resources.destinations()
            self._targets = [destinations.get(e) for e in endpoints.detokenizers]
            if self.settings.router_workers is not None:
                self._beacon_to = destinations.get("router-workers", self.settings.router_workers)
            inbound = resources.bind(zmq.PULL, endpoints.inbound)
            curve = None
            pair, authorised = self.settings.control_key_pair, self.settings.control_authorised_keys
            if pair is not None and authorised is not None:
                curve, zap = open_control_curve(
                    resources.context, pair, authorised, self.counters, self._loop.watch
                )
                stack.callback(zap.close)
            control_sock = resources.bind(zmq.ROUTER, endpoints.control, curve)
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
        """Run the core's timers (the beacon) when due."""
        # Every loop iteration: only a timer that is due costs more than a comparison.
        due = self.core.next_due()
        if due is None or now < due:
            return due
        effects, due = self.core.tick(Instant(now, time.time()))
        self._apply(effects)
        return due

    def _route(self, header: Header, frames: list[FrameLike]) -> None:
        """One validated message: to the core with the time, its effects carried out
        inside one route span when the batch is traced."""
        with tracing.batch_span_if_traced(ROUTE_SPAN, header.row_traces):
            self._apply(self.core.on_message(header, frames, _now()))

    # ------------------------------------------------------------------ effects

    def _apply(self, effects: Sequence[Effect]) -> None:
        appliers = self._appliers
        for effect in effects:
            appliers[type(effect)](effect)

    def _send(self, send: Send) -> None:
        if not self._targets[send.to].send(send.frames):
            return
        if send.counter is not None:
            self.counters.add(*send.counter)
        for owner, nbytes in send.traffic:
            self.traffic.add(DETOKENIZE, owner, 1, nbytes)

    def _save_assignment(self, save: SaveAssignment) -> None:
        """Save a grown assignment; a failure is logged and counted, routing goes on."""
        if self._state_file is None:
            return
        try:
            self._state_file.save(dict(save.assigned))
        except OSError as exc:
            logger.error("detokenizer router state file not saved: %s", exc)
            self.counters.add("state_file_errors", "save")

    def _send_beacon(self, beacon: Beacon) -> None:
        to = self._beacon_to
        if to is not None and not to.backlog and to.send(beacon.frames):
            self.counters.add("beacons", "sent")

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
            workers_per_detokenizer=self.core.workers_per_detokenizer(),
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


def _now() -> Instant:
    return Instant(time.monotonic(), time.time())
