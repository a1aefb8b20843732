"""Serving one worker's app on a port it shares with its siblings.

Workers that ``switchboard up`` starts share *one* listening socket, which the
supervisor binds and every worker inherits (``--listen-fd``); a worker started by hand
binds its own with ``SO_REUSEPORT``, so the kernel spreads new connections over the
workers either way and one worker stopping does not close the port for the others.

A drained worker leaves the listening group (:class:`~httpkit.listening.ListenGate`):
it takes no new connections, ends each one it holds after its current response
(``Connection: close``), and serves what arrives on them meanwhile, so no client is
refused; undrained, it listens again. On a shared socket nothing queued is lost; on a
socket of its own, Linux resets the few connections queued on it at that instant. On
SIGTERM the worker stops admitting (new requests: 503, reported as stopping), lets
in-flight requests finish for up to ``graceful_timeout_s`` (ending what is left with
finish reason ``abort`` just before, so that no client is cut off), then deregisters and
exits 0.

Its connections are held to the settings' HTTP limits and ``Host`` allow-list
(:mod:`httpkit.limits`, :mod:`httpkit.hosts`); each refusal answers in the worker's error
shape and is counted under ``http_rejected`` by its reason, and in Prometheus as
``switchboard_http_refusals_total``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import socket
from types import FrameType
from typing import Final

from fastapi import FastAPI

from httpkit import serving as http_serving
from httpkit.hosts import AllowedHosts
from httpkit.limits import Refusals
from httpkit.listening import ListenGate
from router_core.worker_link import WorkerLink
from switchboard.worker.errors import error_body
from switchboard.worker.metrics import Metrics
from switchboard.worker.settings import LEAVE_PORT_SIGNAL, LISTEN_BACKLOG, WorkerSettings

__all__ = ["listen_socket", "listening", "run_server"]

#: How long before the graceful timeout a stopping worker ends what it still holds.
ABORT_AHEAD_S: Final = 0.5
#: How a worker's refusal names the setting that allows more hosts.
_ALLOWED_HOSTS_SETTING: Final = "--allowed-hosts (switchboard up: allowed_hosts)"


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` shared with the other workers (SO_REUSEPORT).

    Raises ``OSError`` when the port is held by a process that does not share it.
    """
    return http_serving.listen_socket(host, port, reuse_port=True, backlog=LISTEN_BACKLOG)


def listening(host: str, port: int, listen_fd: int | None) -> tuple[socket.socket, ListenGate]:
    """The socket to serve on and the gate that takes the worker out of the listening
    group and back: on the inherited listening socket ``listen_fd`` (duplicates of it,
    so that it stays open here while out of the group), or on one bound to
    ``host:port`` (bound again to rejoin).

    Raises ``OSError`` when binding fails, ``ValueError`` when ``listen_fd`` is not a
    listening TCP socket.
    """
    if listen_fd is None:
        return listen_socket(host, port), ListenGate(
            functools.partial(listen_socket, host, port), shared=False
        )
    inherited = socket.socket(fileno=listen_fd)
    if inherited.type != socket.SOCK_STREAM or not inherited.getsockopt(
        socket.SOL_SOCKET, socket.SO_ACCEPTCONN
    ):
        inherited.detach()  # not ours to close
        raise ValueError(f"file descriptor {listen_fd} is not a listening TCP socket")
    inherited.set_inheritable(False)
    return inherited.dup(), ListenGate(inherited.dup, shared=True, keeps=inherited)


def run_server(
    app: FastAPI,
    sock: socket.socket,
    gate: ListenGate,
    *,
    log_level: str,
    graceful_timeout_s: float,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully; out of the
    listening group (``gate`` closed) while an operator drains this worker."""
    link: WorkerLink = app.state.link
    settings: WorkerSettings = app.state.settings
    link.on_draining = gate.set_closed
    _on_leave_port_signal(gate)

    def stop_admitting() -> None:
        if link.session.registered:
            link.begin_stopping()
        # uvicorn cancels the handlers still running at its graceful timeout, cutting
        # their clients off; ending their streams with an abort just before lets each
        # client read a finish reason and the end of its response.
        asyncio.get_running_loop().call_later(
            max(0.0, graceful_timeout_s - ABORT_AHEAD_S), link.end_in_flight
        )

    try:
        http_serving.serve(
            app,
            sock,
            log_level=log_level,
            graceful_timeout_s=graceful_timeout_s,
            on_stop=stop_admitting,
            limits=settings.http_limits,
            hosts=AllowedHosts.from_setting(
                settings.allowed_hosts, bind_host=settings.host, setting=_ALLOWED_HOSTS_SETTING
            ),
            refusals=Refusals(_refusal_body, functools.partial(_refused, link, app.state.metrics)),
            gate=gate,
        )
    finally:
        gate.release()


def _on_leave_port_signal(gate: ListenGate) -> None:
    """On :data:`LEAVE_PORT_SIGNAL` (the supervisor stops the whole stack) the gate lets
    go of the shared socket for good; handled in the serving loop's thread."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            gate.leave_for_good()  # not serving yet: nothing runs that it could upset
        else:
            loop.call_soon_threadsafe(gate.leave_for_good)

    signal.signal(LEAVE_PORT_SIGNAL, on_signal)


def _refused(link: WorkerLink, metrics: Metrics, reason: str) -> None:
    """Count one refusal of the HTTP layer: in the link's counters and in Prometheus."""
    link.counters.add("http_rejected", reason)
    metrics.http_refused(reason)


def _refusal_body(status: int, reason: str, message: str) -> bytes:
    """A refusal of the HTTP layer in the worker's error shape."""
    kind = "service_unavailable" if status == 503 else "invalid_request_error"
    return json.dumps(error_body(message, kind, status)).encode()
