"""Serving the admin app on its own port, and stopping it cleanly.

The port is bound without ``SO_REUSEPORT`` (one admin app per port: a second one is
refused rather than sharing it). On SIGTERM or SIGINT every event stream is ended at
once, so the graceful stop does not wait for streaming clients, and the process exits 0.
"""

from __future__ import annotations

import socket

from fastapi import FastAPI

from httpkit import serving as http_serving
from httpkit.hosts import AllowedHosts
from httpkit.limits import HttpLimits

__all__ = ["listen_socket", "run_server"]

#: Seconds requests in flight (a pause barrier, say) get after a stop signal.
GRACEFUL_S = 3


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``OSError`` if it cannot be bound."""
    return http_serving.listen_socket(host, port)


def run_server(
    app: FastAPI,
    sock: socket.socket,
    *,
    log_level: str,
    limits: HttpLimits | None = None,
    hosts: AllowedHosts | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully, holding its
    clients to ``limits`` and ``hosts`` (:func:`httpkit.serving.serve`'s defaults when
    None); their refusals have the app's error shape."""

    def end_event_streams() -> None:
        state = getattr(app.state, "admin", None)
        if state is not None:
            state.hub.close()

    http_serving.serve(
        app,
        sock,
        log_level=log_level,
        graceful_timeout_s=GRACEFUL_S,
        on_stop=end_event_streams,
        limits=limits,
        hosts=hosts,
    )
