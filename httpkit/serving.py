"""Serving a FastAPI app with uvicorn on a socket we bound, and stopping it cleanly.

Shared by the HTTP workers and the admin app. :func:`listen_socket` binds (optionally
with ``SO_REUSEPORT``, so sibling workers share a port); :func:`serve` runs uvicorn on
it until SIGTERM or SIGINT, calls ``on_stop`` in the event loop's thread as soon as the
signal arrives (a worker stops admitting, the admin app ends its event streams), lets
requests in flight finish for up to ``graceful_timeout_s``, and returns normally, so
the process exits 0.

Every connection is held to the server's :class:`~httpkit.limits.HttpLimits` (by
:mod:`httpkit.protocol`) and every request to its :class:`~httpkit.hosts.AllowedHosts`
(by :class:`~httpkit.hosts.HostAllowList`, wrapped around the app here, so that the app
object itself, as tests drive it in-process, answers any host).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import resource
import signal
import socket
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from httpkit.hosts import AllowedHosts, HostAllowList
from httpkit.limits import HttpLimits, Refusals
from httpkit.listening import ListenGate
from httpkit.protocol import limited_protocol

__all__ = ["FILE_HEADROOM", "STOP_SIGNALS", "listen_socket", "raise_file_limit", "serve"]

#: Signals that ask a server to stop.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: File descriptors a server needs besides its connections (sockets, logs, libraries).
FILE_HEADROOM = 256

logger = logging.getLogger(__name__)


def listen_socket(
    host: str, port: int, *, reuse_port: bool = False, backlog: int = 128
) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``OSError`` if it cannot be bound.

    With ``reuse_port`` other processes may bind the same port (the kernel spreads new
    connections over them); without it, a port someone holds is refused.
    """
    bare = host.strip("[]")
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(bare).version == 6 else socket.AF_INET
    except ValueError:  # a host name
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((bare, port))
        sock.listen(backlog)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _GracefulServer(uvicorn.Server):
    """uvicorn's server that calls ``on_stop`` when asked to stop and then exits 0."""

    def __init__(
        self, config: uvicorn.Config, on_stop: Callable[[], None], gate: ListenGate | None
    ) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self._gate = gate
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._gate is not None and self.started:
            self._gate.attach(self)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGTERM/SIGINT, then return normally.

        uvicorn's own version raises the caught signal again after the graceful stop, so
        the process would die by SIGTERM; a server asked to stop has stopped cleanly.
        """
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None:
            # Runs in a signal handler: hand the work to the loop's thread.
            self._loop.call_soon_threadsafe(self._on_stop)
        super().handle_exit(sig, frame)


def raise_file_limit(connections: int) -> None:
    """Raise this process's open-file limit so that ``connections`` fit with
    :data:`FILE_HEADROOM` to spare, as far as the hard limit lets; a warning when it does
    not (accepting then fails with EMFILE before ``max_connections`` is reached)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + FILE_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        if raised < wanted:
            logger.warning(
                "open files are limited to %d: fewer than max_connections=%d connections "
                "fit (raise the hard limit, ulimit -Hn, or lower max_connections)",
                raised,
                connections,
            )


def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    log_level: str,
    graceful_timeout_s: float,
    on_stop: Callable[[], None],
    limits: HttpLimits | None = None,
    hosts: AllowedHosts | None = None,
    refusals: Refusals | None = None,
    gate: ListenGate | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully.

    ``limits`` default to :class:`HttpLimits`' defaults, ``hosts`` to the loopback names
    and the socket's own address; ``refusals`` shape and count what either refuses;
    ``gate`` (:class:`~httpkit.listening.ListenGate`) lets the server stop taking
    connections and take them again while it runs (it closes ``sock`` when it closes).
    """
    limits = limits or HttpLimits()
    refusals = refusals or Refusals()
    if hosts is None:
        hosts = AllowedHosts((), bind_host=str(sock.getsockname()[0]), setting="allowed_hosts")
    if not hosts.any:
        app = HostAllowList(app, hosts=hosts, refusals=refusals)
    raise_file_limit(limits.max_connections)
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http=limited_protocol(limits, refusals, gate),
        # Neither app serves websockets; an upgrade would hand the connection to a
        # protocol without these limits.
        ws="none",
        interface="asgi3",
        lifespan="on",
        access_log=False,
        log_level=log_level.lower(),
        # uvicorn takes whole seconds; rounding down could cut in-flight requests off.
        timeout_graceful_shutdown=math.ceil(graceful_timeout_s),
        server_header=False,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 by default, so any local client
        # could name the address audit records and logs show; a request's client is the
        # connection's peer.
        proxy_headers=False,
        # uvicorn's loggers propagate to the root logger the process configured, so its
        # lines carry the process's role and pid like every other line of the stack.
        log_config=None,
        # uvicorn's own 503 past limit_concurrency also refuses requests on connections
        # already open; the protocol limits connections instead.
        limit_concurrency=None,
    )
    _GracefulServer(config, on_stop, gate).run(sockets=[sock])
