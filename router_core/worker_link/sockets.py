"""A worker link's three sockets: the inbox it reads on the event loop, and the two PUSHes
to the router that everything leaves by, through one send-and-count path.

The inbox is a PULL bound at the worker's return address; each message read there is
validated by :func:`router_core.inbound.accept` and handed to the link's handler. The
``requests`` PUSH carries generate, embed and abort requests; the ``control`` PUSH
carries registrations, heartbeats, acknowledgements and the deregistration. Every send
goes through :meth:`LinkSockets.send`, which never blocks and counts its outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

import zmq

from router_core.counters import Counters
from router_core.inbound import FrameCount, Handler, accept, read_waiting
from router_core.transport import (
    FrameLike,
    bind,
    close_bound,
    connect,
)
from router_core.wire.codec import Frames
from router_core.worker_link.dispatch import worker_frame_count
from router_core.worker_link.effects import Channel
from router_core.worker_link.outcomes import Count
from router_core.worker_link.remote_sockets import RemoteLinkSockets
from router_core.worker_link.sending import send_counted
from router_core.worker_link.settings import WorkerLinkSettings

__all__ = ["Channel", "LinkSockets", "link_sockets"]

logger = logging.getLogger(__name__)

#: Lingers, so the aborts sent while closing and the deregistration still leave.
REQUESTS_LINGER_MS: Final = 500
CONTROL_LINGER_MS: Final = 1000


class LinkSockets:
    """The inbox, the ``requests`` and ``control`` PUSHes and their context.

    Made closed; :meth:`open` binds and connects, :meth:`close` closes everything
    (inbox ipc file removed, context termed). Every inbox message that
    :func:`~router_core.inbound.accept` validates (with ``frame_count``) goes to
    ``handle``; those that break the protocol are counted in ``counters`` under
    ``rejected`` and skipped.
    """

    def __init__(
        self,
        settings: WorkerLinkSettings,
        counters: Counters,
        handle: Handler,
        frame_count: FrameCount,
    ) -> None:
        self._settings = settings
        self._counters = counters
        self._handle = handle
        self._frame_count = frame_count
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._inbox: zmq.Socket[bytes] | None = None
        self._pushes: dict[Channel, zmq.Socket[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox_fd: int | None = None

    def is_open(self) -> bool:
        """Whether :meth:`open` succeeded and :meth:`close` has not run since."""
        return self._context is not None

    def open(self) -> None:
        """Bind the inbox, connect the PUSHes, and start reading on the running loop.

        Raises ``EndpointError`` for an endpoint the
        loopback rule refuses and ``zmq.ZMQError`` when binding fails (nothing is left
        open then); ``RuntimeError`` when already open.
        """
        if self._context is not None:
            raise RuntimeError("the worker link is already open")
        s = self._settings
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            self._inbox = bind(context, zmq.PULL, s.address, hwm=s.hwm, allow_remote=s.allow_remote)
            self._pushes["requests"] = connect(
                context, zmq.PUSH, s.requests_endpoint, hwm=s.hwm, linger_ms=REQUESTS_LINGER_MS
            )
            self._pushes["control"] = connect(
                context, zmq.PUSH, s.workers_endpoint, hwm=s.hwm, linger_ms=CONTROL_LINGER_MS
            )
        except BaseException:
            self._close_sockets(context)
            raise
        self._context = context
        self._loop = asyncio.get_running_loop()
        # ZMQ_FD is edge-triggered: it signals when the socket's events may have changed,
        # so the reader drains until EAGAIN (or reschedules itself) every time it runs.
        fd = int(self._inbox.getsockopt(zmq.FD))
        self._inbox_fd = fd
        self._loop.add_reader(fd, self._read_ready)
        self._loop.call_soon(self._read_ready)

    def close(self) -> None:
        """Stop reading and close every socket and the context; safe to call twice."""
        context, self._context = self._context, None
        if context is not None:
            self._close_sockets(context)

    def _close_sockets(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        if self._loop is not None and self._inbox_fd is not None:
            self._loop.remove_reader(self._inbox_fd)
        self._inbox_fd = None
        if self._inbox is not None:
            close_bound(self._inbox, self._settings.address)
            self._inbox = None
        for sock in self._pushes.values():
            sock.close()
        self._pushes.clear()
        context.term()

    # ------------------------------------------------------------------ outbound

    def send(
        self,
        channel: Channel,
        frames: Frames,
        *,
        sent: Count | None = None,
        unsent: Count | None = None,
    ) -> bool:
        """Send one message on ``channel`` without blocking; True if ZeroMQ took it.

        ``sent`` is counted when it left, ``unsent`` when the router could not take it now
        (its queue is full or not connected) or the link is closed.
        """
        return send_counted(self._pushes.get(channel), frames, self._counters, sent, unsent)

    # ------------------------------------------------------------------ inbound

    def _read_ready(self) -> None:
        """Validate and apply the waiting messages (:func:`read_waiting`); reschedule if
        more may be waiting."""
        sock = self._inbox
        if sock is None:
            return

        def apply(frames: list[FrameLike]) -> None:
            accept(frames, self._handle, self._counters, self._frame_count)

        if not read_waiting(sock, apply, self._counters):
            # A flood: let the request handlers run, then carry on draining.
            assert self._loop is not None
            self._loop.call_soon(self._read_ready)


def link_sockets(
    settings: WorkerLinkSettings,
    worker_id: str,
    counters: Counters,
    handle: Handler,
    on_lost: Callable[[], None] | None = None,
) -> LinkSockets | RemoteLinkSockets:
    """The sockets of a worker link: bound on the control host, or (``settings.curve``)
    connected to the worker gateway from a host of its own, which calls ``on_lost`` when
    that connection is lost (a local link has no connection to lose)."""
    if settings.curve is None:
        return LinkSockets(settings, counters, handle, worker_frame_count)
    return RemoteLinkSockets(
        settings, worker_id, counters, handle, worker_frame_count, on_lost=on_lost
    )
