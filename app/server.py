"""Serving the admin app with uvicorn on its own port, and stopping it cleanly.

The port is bound without ``SO_REUSEPORT`` (one admin app per port: a second one is
refused rather than sharing it). On SIGTERM or SIGINT every event stream is ended at
once, so the graceful stop does not wait for streaming clients, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
from collections.abc import Iterator
from types import FrameType

import uvicorn
from fastapi import FastAPI

__all__ = ["AdminServer", "listen_socket", "run_server"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds requests in flight (a pause barrier, say) get after a stop signal.
GRACEFUL_S = 3


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``OSError`` if it cannot be bound."""
    try:
        family = (
            socket.AF_INET6
            if ipaddress.ip_address(host.strip("[]")).version == 6
            else (socket.AF_INET)
        )
    except ValueError:  # a host name
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


class AdminServer(uvicorn.Server):
    """uvicorn's server, ending the event streams as soon as a stop is asked."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGTERM/SIGINT and return normally (exit status 0), where
        uvicorn's own version raises the signal again after stopping."""
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self._app.state, "admin", None)
        if self._loop is not None and state is not None:
            # A signal handler: hand the work to the loop's thread.
            self._loop.call_soon_threadsafe(state.hub.close)
        super().handle_exit(sig, frame)


def run_server(app: FastAPI, sock: socket.socket, *, log_level: str) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully."""
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=log_level.lower(),
        timeout_graceful_shutdown=GRACEFUL_S,
        server_header=False,
        # uvicorn's loggers propagate to the root logger the CLI configured.
        log_config=None,
    )
    AdminServer(config, app).run(sockets=[sock])
