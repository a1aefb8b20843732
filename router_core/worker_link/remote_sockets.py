"""A worker link's sockets on a worker host: two CURVE connections to the worker gateway.

On a host of its own a worker binds nothing. Its ``control`` socket is a DEALER (routing
id: the worker id) connected to the gateway's control endpoint (``workers_endpoint`` in
the settings): it carries the worker's control traffic up (``UP``) and everything for the
worker down (``DOWN``), so the control host never connects to the worker host. Its
``requests`` socket is a PUSH to the gateway's requests endpoint. The gateway's own verbs
(``HELLO``, ``WELCOME``, ``WHO``, ``REFUSED``) are answered here: ``HELLO`` is sent when
the link opens and again whenever the gateway says ``WHO`` (it restarted, or forgot a
worker it had not heard from). Same interface as :class:`~.sockets.LinkSockets`.

The gateway connection is watched (a ZeroMQ socket monitor): ``on_lost()`` runs when it
is lost (the network went away and ZMTP heartbeats timed out, or the gateway died), so
the link can end what it holds with a clear error at once instead of after its idle
bound; when a CURVE handshake succeeds again the worker says ``HELLO`` again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Final

import zmq
from zmq.utils.monitor import recv_monitor_message

from router_core.counters import Counters
from router_core.curve import ClientKeys
from router_core.inbound import FrameCount, Handler, accept, read_waiting
from router_core.limits import MAX_FRAME_BYTES, ZMTP_HEARTBEAT_IVL_MS, ZMTP_HEARTBEAT_TIMEOUT_MS
from router_core.transport import (
    MAX_FRAMES,
    FrameLike,
    send_frames,
)
from router_core.wire.codec import Frames
from router_core.worker_gateway import frames as verbs
from router_core.worker_link.effects import Channel
from router_core.worker_link.outcomes import Count
from router_core.worker_link.sending import send_counted
from router_core.worker_link.settings import WorkerLinkSettings
from router_core.zap import curve_client

__all__ = ["RemoteLinkSockets"]

logger = logging.getLogger(__name__)

_LINGER_MS: Final = 1000
#: A connection attempt gives up after this and ZeroMQ tries again: left to the kernel, a
#: SYN sent while the network was down is retried after 1, 3, 7, 15, 31 ... s, so a
#: worker could stay away long after the network came back.
_CONNECT_TIMEOUT_MS: Final = 2000
_WATCHED: Final = zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED


class RemoteLinkSockets:
    """The gateway DEALER and the requests PUSH of a worker on another host."""

    def __init__(
        self,
        settings: WorkerLinkSettings,
        worker_id: str,
        counters: Counters,
        handle: Handler,
        frame_count: FrameCount,
        *,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        if settings.curve is None:
            raise ValueError("a worker on another host needs CURVE keys (settings.curve)")
        self._settings = settings
        self._keys: ClientKeys = settings.curve
        self._routing_id = worker_id.encode("ascii")
        self._counters = counters
        self._handle = handle
        self._frame_count = frame_count
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._sockets: dict[Channel, zmq.Socket[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd: int | None = None
        self._refusal_logged: set[bytes] = set()
        self._on_lost = on_lost
        self._monitor: zmq.Socket[bytes] | None = None
        #: Whether the gateway connection is up (after a first handshake).
        self.connected = False
        self._ever_connected = False

    def is_open(self) -> bool:
        """Whether :meth:`open` succeeded and :meth:`close` has not run since."""
        return self._context is not None

    def open(self) -> None:
        """Connect both sockets, say ``HELLO`` and start reading on the running loop."""
        if self._context is not None:
            raise RuntimeError("the worker link is already open")
        s = self._settings
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            self._sockets["control"] = self._connect(
                context, zmq.DEALER, s.workers_endpoint, immediate=False
            )
            self._sockets["requests"] = self._connect(
                context, zmq.PUSH, s.requests_endpoint, immediate=True
            )
        except BaseException:
            self._close(context)
            raise
        self._context = context
        self._hello()
        self._loop = asyncio.get_running_loop()
        fd = int(self._sockets["control"].getsockopt(zmq.FD))
        self._fd = fd
        self._loop.add_reader(fd, self._read_ready)
        self._loop.call_soon(self._read_ready)
        assert self._monitor is not None  # made by _connect, before connecting
        self._loop.add_reader(int(self._monitor.getsockopt(zmq.FD)), self._read_monitor)
        self._loop.call_soon(self._read_monitor)

    def _connect(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        socket_type: int,
        endpoint: str,
        *,
        immediate: bool,
    ) -> zmq.Socket[bytes]:
        sock = context.socket(socket_type)
        try:
            sock.setsockopt(zmq.SNDHWM, self._settings.hwm)
            # Never a full receive queue on a socket that pings (see limits): what comes
            # down is this worker's own rows and the stack's broadcasts, bounded by what
            # it asked for; the gateway's queue towards it is the bounded one.
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.LINGER, _LINGER_MS)
            sock.setsockopt(zmq.IMMEDIATE, int(immediate))
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
            sock.setsockopt(zmq.HEARTBEAT_IVL, ZMTP_HEARTBEAT_IVL_MS)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, ZMTP_HEARTBEAT_TIMEOUT_MS)
            sock.setsockopt(zmq.HEARTBEAT_TTL, ZMTP_HEARTBEAT_TIMEOUT_MS)
            sock.setsockopt(zmq.CONNECT_TIMEOUT, _CONNECT_TIMEOUT_MS)
            if socket_type == zmq.DEALER:
                sock.setsockopt(zmq.ROUTING_ID, self._routing_id)
                # Watched from before it connects: a first handshake must not be missed.
                self._monitor = sock.get_monitor_socket(_WATCHED)
            curve_client(sock, self._keys)
            sock.connect(endpoint)
        except BaseException:
            sock.close(linger=0)
            raise
        return sock

    def close(self) -> None:
        """Stop reading and close both sockets and the context; safe to call twice."""
        context, self._context = self._context, None
        if context is not None:
            self._close(context)

    def _close(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        if self._loop is not None and self._fd is not None:
            self._loop.remove_reader(self._fd)
        self._fd = None
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            if self._loop is not None:
                self._loop.remove_reader(int(monitor.getsockopt(zmq.FD)))
            control = self._sockets.get("control")
            if control is not None:
                control.disable_monitor()
            monitor.close(linger=0)
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()
        context.term()

    def _hello(self) -> None:
        message = [verbs.HELLO, self._settings.address.encode()]
        if not send_frames(self._sockets["control"], message):
            self._counters.add("dropped", "gateway_hello")
        self._rearm()

    def _rearm(self) -> None:
        """After a send on the DEALER it also reads from: ZMQ_FD is edge-triggered and a
        send may take the edge of a message that arrived meanwhile, so look now."""
        sock = self._sockets.get("control")
        loop = self._loop
        if loop is not None and sock is not None and int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
            loop.call_soon(self._read_ready)

    # ------------------------------------------------------------------ outbound

    def send(
        self,
        channel: Channel,
        frames: Frames,
        *,
        sent: Count | None = None,
        unsent: Count | None = None,
    ) -> bool:
        """Send one message on ``channel`` without blocking; True if ZeroMQ took it
        (the contract of :meth:`~.sockets.LinkSockets.send`)."""
        message = frames if channel == "requests" else [verbs.UP, *frames]
        took = send_counted(self._sockets.get(channel), message, self._counters, sent, unsent)
        if took and channel == "control":
            self._rearm()
        return took

    # ------------------------------------------------------------------ inbound

    def _read_ready(self) -> None:
        sock = self._sockets.get("control")
        if sock is not None and not read_waiting(sock, self._apply, self._counters, MAX_FRAMES + 1):
            assert self._loop is not None
            self._loop.call_soon(self._read_ready)

    def _read_monitor(self) -> None:
        """Every waiting connection event (the monitor's FD is edge-triggered too)."""
        while self._monitor is not None:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)["event"]
            except zmq.Again:
                return
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED and not self.connected:
                self.connected = True
                self._counters.add("gateway", "connected")
                if self._ever_connected:
                    # Back after a loss: the gateway may have forgotten this worker.
                    logger.info("connected to the worker gateway again")
                    self._hello()
                self._ever_connected = True
            elif event == zmq.EVENT_DISCONNECTED and self.connected:
                self.connected = False
                self._counters.add("gateway", "disconnected")
                logger.warning("lost the connection to the worker gateway; reconnecting")
                if self._on_lost is not None:
                    self._on_lost()

    def _apply(self, frames: list[FrameLike]) -> None:
        verb = frames[0] if isinstance(frames[0], bytes) else frames[0].bytes
        if verb == verbs.DOWN and len(frames) > 1:
            accept(frames[1:], self._handle, self._counters, self._frame_count)
        else:
            self._gateway_said(verb, frames[1:])

    def _gateway_said(self, verb: bytes, rest: Sequence[FrameLike]) -> None:
        if verb == verbs.WHO:
            self._counters.add("gateway", "who")
            self._hello()
        elif verb == verbs.WELCOME:
            self._counters.add("gateway", "welcome")
            self._refusal_logged.clear()
        elif verb == verbs.REFUSED and len(rest) == 1:
            reason = rest[0] if isinstance(rest[0], bytes) else rest[0].bytes
            self._counters.add("refused", reason.decode("ascii", "replace"))
            if reason not in self._refusal_logged:
                self._refusal_logged.add(reason)
                logger.error("the worker gateway refused this worker: %s", reason.decode())
        else:
            self._counters.add("rejected", "gateway_verb")
