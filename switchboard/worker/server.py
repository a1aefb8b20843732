"""Serving one worker's app on a port it shares with its siblings.

Every worker binds its own listening socket with ``SO_REUSEPORT``, so the kernel spreads
new connections over the workers and one worker stopping does not close the port for
the others. On SIGTERM the worker stops admitting (new requests: 503, reported as
draining), lets in-flight requests finish for up to ``graceful_timeout_s``, then
deregisters and exits 0.
"""

from __future__ import annotations

import socket
from typing import Final

from fastapi import FastAPI

from httpkit import serving as http_serving
from router_core.worker_link import WorkerLink

__all__ = ["listen_socket", "run_server"]

#: Pending connections the kernel queues per worker.
BACKLOG: Final = 2048


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` shared with the other workers (SO_REUSEPORT).

    Raises ``OSError`` when the port is held by a process that does not share it.
    """
    return http_serving.listen_socket(host, port, reuse_port=True, backlog=BACKLOG)


def run_server(
    app: FastAPI, sock: socket.socket, *, log_level: str, graceful_timeout_s: float
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully."""
    link: WorkerLink = app.state.link

    def stop_admitting() -> None:
        if link.session.registered:
            link.begin_stopping()

    http_serving.serve(
        app,
        sock,
        log_level=log_level,
        graceful_timeout_s=graceful_timeout_s,
        on_stop=stop_admitting,
        # Streams carry their own data; keep idle keep-alive connections a little longer
        # than the typical client pool's so the server is not the one dropping them.
        keep_alive_s=10,
    )
