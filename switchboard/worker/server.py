"""Serving one worker's app with uvicorn on a port it shares with its siblings.

Every worker binds its own listening socket with ``SO_REUSEPORT``, so the kernel spreads
new connections over the workers and one worker stopping does not close the port for
the others. On SIGTERM the worker stops admitting (new requests: 503, reported as
draining), lets in-flight requests finish for up to ``graceful_timeout_s``, then
deregisters and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import signal
import socket
from collections.abc import Iterator
from types import FrameType

import uvicorn
from fastapi import FastAPI

from router_core.worker_link import WorkerLink

__all__ = ["WorkerServer", "listen_socket", "run_server"]

#: Signals that ask a worker to stop.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: Pending connections the kernel queues per worker.
BACKLOG = 2048


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` shared with other processes (SO_REUSEPORT).

    Raises ``OSError`` when the port is held by a process that does not share it.
    """
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:  # a host name
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


class WorkerServer(uvicorn.Server):
    """uvicorn's server, telling the link to stop admitting as soon as a stop is asked."""

    def __init__(self, config: uvicorn.Config, link: WorkerLink) -> None:
        super().__init__(config)
        self._link = link
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGTERM/SIGINT, then return normally (exit status 0).

        uvicorn's own version raises the caught signal again after the graceful stop, so
        the process would die by SIGTERM; a worker asked to stop has stopped cleanly.
        """
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None and self._link.session.registered:
            # Runs in a signal handler: hand the state change to the loop's thread.
            self._loop.call_soon_threadsafe(self._link.begin_stopping)
        super().handle_exit(sig, frame)


def run_server(
    app: FastAPI, sock: socket.socket, *, log_level: str, graceful_timeout_s: float
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully."""
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=log_level.lower(),
        # uvicorn takes whole seconds; rounding down could cut in-flight requests off.
        timeout_graceful_shutdown=math.ceil(graceful_timeout_s),
        server_header=False,
        # uvicorn's loggers propagate to the root logger the worker configured, so its
        # lines carry the worker id and pid like every other line of the stack.
        log_config=None,
        # Streams carry their own data; keep idle keep-alive connections a little longer
        # than the typical client pool's so the server is not the one dropping them.
        timeout_keep_alive=10,
    )
    link: WorkerLink = app.state.link
    WorkerServer(config, link).run(sockets=[sock])
