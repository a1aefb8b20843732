"""The detokenizer router: engine outputs -> N detokenizers, sticky per worker.

Batches are split per destination detokenizer, one message each (rows grouped, never
decoded); freeze-GC and idle batches go to every detokenizer.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import zmq

from router_core.control.server import Command, ControlServer, ReplyTo
from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.detokenizer_router.picker import DetokenizerPicker, StickyKey
from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.loop import PollLoop
from router_core.transport import (
    DEFAULT_HWM,
    FrameLike,
    MalformedMessage,
    bind,
    close_bound,
    recv_message,
)
from router_core.wire import (
    BATCH_KINDS,
    Header,
    Kind,
    WireError,
    decode_header,
    encode_header,
    payload_frame_count,
)

__all__ = ["COMMANDS", "DetokenizerRouter", "DetokenizerRouterSettings"]

logger = logging.getLogger(__name__)

_BUDGET: Final = 512
_BROADCAST_KINDS: Final = frozenset({Kind.FREEZE_GC, Kind.IDLE})


@dataclass(frozen=True, kw_only=True)
class DetokenizerRouterSettings:
    """How a detokenizer router runs."""

    endpoints: DetokenizerRouterEndpoints
    sticky_key: StickyKey = "worker"
    hwm: int = DEFAULT_HWM
    backlog_limit: int = 1000
    drain_timeout_s: float = 2.0
    allow_remote: bool = False

    def __post_init__(self) -> None:
        if not self.endpoints.detokenizers:
            raise ValueError("need at least one detokenizer endpoint")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")


class DetokenizerRouter:
    """Runs in one thread: :meth:`run` binds, loops until stopped, and closes."""

    def __init__(
        self,
        settings: DetokenizerRouterSettings,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self.settings = settings
        self._context = context
        self.counters = Counters()
        self.picker = DetokenizerPicker(len(settings.endpoints.detokenizers), settings.sticky_key)
        self.started_at = time.monotonic()
        self._loop = PollLoop()
        self._targets: list[Destination] = []

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Bind, serve until stopped, then drain and close everything."""
        owns_context = self._context is None
        context = self._context or zmq.Context()
        endpoints = self.settings.endpoints
        destinations = DestinationSet(
            context, self.counters, hwm=self.settings.hwm, backlog_limit=self.settings.backlog_limit
        )
        opened: list[tuple[zmq.Socket[bytes], str]] = []
        try:
            for endpoint in endpoints.detokenizers:
                self._targets.append(destinations.get(endpoint))
            inbound = bind(
                context,
                zmq.PULL,
                endpoints.inbound,
                hwm=self.settings.hwm,
                allow_remote=self.settings.allow_remote,
            )
            opened.append((inbound, endpoints.inbound))
            control_sock = bind(
                context, zmq.ROUTER, endpoints.control, allow_remote=self.settings.allow_remote
            )
            opened.append((control_sock, endpoints.control))
            control = ControlServer(control_sock, self, COMMANDS, self.counters)
            self._loop.watch(inbound, lambda: self._drain(inbound))
            self._loop.watch(control_sock, control.handle_ready)
            logger.info("detokenizer router serving on %s (pid %d)", endpoints.inbound, os.getpid())
            self._loop.run(destinations.backlogged, lambda now: None)
        finally:
            destinations.close_all(self.settings.drain_timeout_s)
            for sock, endpoint in opened:
                close_bound(sock, endpoint)
            if owns_context:
                context.term()

    def _drain(self, sock: zmq.Socket[bytes]) -> None:
        for _ in range(_BUDGET):
            try:
                frames = recv_message(sock)
            except zmq.Again:
                return
            except MalformedMessage as exc:
                self.counters.add("rejected", exc.reason)
                continue
            try:
                header = decode_header(frames[0])  # type: ignore[arg-type]
            except WireError as exc:
                self.counters.add("rejected", exc.reason)
                continue
            if len(frames) - 1 != payload_frame_count(header):
                self.counters.add("rejected", "frame_count")
                continue
            self._route(header, frames)

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
        groups = self.picker.group(header.rids, header.reply_to)
        for index, rows in groups.items():
            if len(groups) == 1:
                message = frames
            else:
                sub_header = Header(
                    kind,
                    [header.rids[i] for i in rows],
                    [header.reply_to[i] for i in rows],
                    header.sent_ns,
                    header.traceparent,
                    header.tracestate,
                )
                message = [encode_header(sub_header), *(frames[i + 1] for i in rows)]
            if self._targets[index].send(message):
                self.counters.add("routed_rows", f"detokenizer-{index}", len(rows))

    def status(self) -> dict[str, Any]:
        """Counters and backlogs, for ``status``."""
        return {
            "role": "detokenizer_router",
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started_at, 3),
            "detokenizers": len(self._targets),
            "sticky_key": self.picker.key,
            "counters": self.counters.snapshot(),
            "backlogs": {t.endpoint: len(t.backlog) for t in self._targets},
        }


class _NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


def _status(router: DetokenizerRouter, args: _NoArgs, reply_to: ReplyTo) -> Any:
    return router.status()


COMMANDS: Final[dict[str, Command[DetokenizerRouter]]] = {
    "status": Command(_status, _NoArgs, "counters and backlogs"),
}
