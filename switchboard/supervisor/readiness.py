"""Is a child ready? One probe per :class:`ReadyCheck` kind, and waiting on a group.

Probes ask the running processes themselves (the router's control socket, the socket
files, the workers' ``/health``), never a log line or a fixed delay.
"""

from __future__ import annotations

import logging
import socket
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec

from router_core.control import ControlClient, ControlCommand, ControlError
from router_core.control.commands import DETOK_STATUS, LIST_WORKERS, LOAD
from router_core.control.commands import STATUS as ROUTER_STATUS
from router_core.control.replies import WorkerView
from switchboard.supervisor.children import Child, ReadyCheck, describe_exit
from switchboard.supervisor.layout import http_url
from switchboard.worker.settings import WORKER_HEADER

__all__ = ["Probes", "StartupAborted", "StartupFailed", "http_url", "wait_until_ready"]

Args = TypeVar("Args", bound=msgspec.Struct)
Reply = TypeVar("Reply")

log = logging.getLogger("switchboard.supervisor")

#: How long one probe waits for an answer; the group deadline bounds the whole wait.
_PROBE_TIMEOUT_S = 0.5
_POLL_INTERVAL_S = 0.05
#: Fresh connections one ``worker-http`` probe opens to find a worker (each lands on one
#: of the workers sharing the port; the group's deadline bounds the whole search).
_HEALTH_TRIES = 8
#: Registry states of a worker that admits requests (or would, once continued).
_ADMITTING = frozenset({"serving", "paused"})


class StartupFailed(Exception):
    """A child exited or stayed unready past the deadline; the message says which."""


class StartupAborted(Exception):
    """The supervisor was asked to stop while the stack was starting."""


class Probes:
    """Answers "is it ready?" for each kind of :class:`ReadyCheck`.

    Holds a control client per endpoint and one HTTP client; :meth:`close` closes them.
    Control requests carry ``key`` (the stack key; None: none) and say they come from
    the ``supervisor``.
    """

    def __init__(self, router_control: str, base_url: str, key: str | None = None) -> None:
        self.router_control = router_control
        self.base_url = base_url
        self._key = key
        self._clients: dict[str, ControlClient] = {}
        self._http = httpx.Client(timeout=_PROBE_TIMEOUT_S, trust_env=False)
        #: A client that opens a new connection per request, to reach every worker.
        self._fresh = httpx.Client(
            timeout=_PROBE_TIMEOUT_S,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        #: Workers that have answered ``/health`` with 200 (``worker-http``).
        self._healthy: set[str] = set()
        self._table: dict[str, Callable[[str], bool]] = {
            "control": self.control_answers,
            "socket": self.socket_bound,
            "engine": self.engine_reporting,
            "worker": self.worker_serving,
            "worker-http": self.worker_answers,
            "http": self.http_ok,
            "tcp": self.tcp_listening,
        }

    def ready(self, check: ReadyCheck) -> bool:
        """Whether the child behind ``check`` is ready now."""
        return self._table[check.kind](check.target)

    def request(
        self,
        endpoint: str,
        command: ControlCommand[Args, Reply],
        args: Args | None = None,
        *,
        timeout_s: float = _PROBE_TIMEOUT_S,
    ) -> Reply:
        """``command``'s typed reply from ``endpoint``; ControlError (ControlTimeout after
        ``timeout_s``) if it fails."""
        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = ControlClient(
                endpoint, timeout_s=timeout_s, key=self._key, actor="supervisor"
            )
        return client.request(command, args, reply_timeout_s=timeout_s)

    def control_answers(self, endpoint: str) -> bool:
        """The control socket at ``endpoint`` answers ``status`` (the tokenizer router's,
        or at any other endpoint the detokenizer router's)."""
        status: ControlCommand[Any, Any] = (
            ROUTER_STATUS if endpoint == self.router_control else DETOK_STATUS
        )
        try:
            self.request(endpoint, status)
        except ControlError:
            return False
        return True

    def socket_bound(self, path: str) -> bool:
        """A socket file exists at ``path`` (its process has bound it)."""
        try:
            return stat.S_ISSOCK(Path(path).lstat().st_mode)
        except FileNotFoundError:
            return False

    def tcp_listening(self, endpoint: str) -> bool:
        """Something accepts a TCP connection at ``endpoint`` (``tcp://HOST:PORT``)."""
        host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), _PROBE_TIMEOUT_S):
                return True
        except (OSError, ValueError):
            return False

    def engine_reporting(self, _: str = "") -> bool:
        """The router holds a load snapshot from the engine."""
        try:
            return self.request(self.router_control, LOAD) is not None
        except ControlError:
            return False

    def workers(self, timeout_s: float = _PROBE_TIMEOUT_S) -> dict[str, WorkerView]:
        """The router's registry by worker id; ControlError if the router does not answer."""
        listed = self.request(self.router_control, LIST_WORKERS, timeout_s=timeout_s)
        return {view.worker_id: view for view in listed}

    def worker_serving(self, worker_id: str) -> bool:
        """Worker ``worker_id`` is registered and admitting, and ``/health`` answers 200."""
        try:
            record = self.workers().get(worker_id)
        except ControlError:
            return False
        if record is None or record.state not in _ADMITTING:
            return False
        return self.http_healthy()

    def worker_answers(self, worker_id: str) -> bool:
        """Worker ``worker_id`` has answered ``/health`` with 200, itself (its
        ``X-Switchboard-Worker`` header): a few fresh connections are tried, and what
        any other worker answers is remembered for its own probe."""
        for _ in range(_HEALTH_TRIES):
            if worker_id in self._healthy:
                return True
            try:
                response = self._fresh.get(f"{self.base_url}/health")
            except httpx.HTTPError:
                return False
            answered = response.headers.get(WORKER_HEADER)
            if response.status_code == 200 and answered:
                self._healthy.add(answered)
        return worker_id in self._healthy

    def http_healthy(self) -> bool:
        """``GET /health`` on the shared port answers 200 (any one worker answers)."""
        return self.http_ok(f"{self.base_url}/health")

    def http_ok(self, url: str) -> bool:
        """``GET url`` answers 200."""
        try:
            return self._http.get(url).status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._http.close()
        self._fresh.close()


def wait_until_ready(
    children: Sequence[Child],
    probes: Probes,
    deadline: float,
    stop_requested: Callable[[], bool],
) -> None:
    """Return once every child in ``children`` is ready.

    Raises :class:`StartupFailed` when one exits or ``deadline`` (monotonic) passes
    first, and :class:`StartupAborted` when ``stop_requested()`` turns true.
    """
    pending = list(children)
    while True:
        for child in pending:
            code = child.poll()
            if code is not None:
                raise StartupFailed(
                    f"{child.name} (pid {child.pid}) exited during startup "
                    f"({describe_exit(code)}){child.exit_context()}"
                )
        pending = [child for child in pending if not probes.ready(child.spec.ready)]
        if not pending:
            return
        if stop_requested():
            raise StartupAborted
        if time.monotonic() >= deadline:
            names = ", ".join(child.name for child in pending)
            context = "".join(_unready_context(child) for child in pending)
            raise StartupFailed(f"not ready before the startup deadline: {names}{context}")
        time.sleep(_POLL_INTERVAL_S)


def _unready_context(child: Child) -> str:
    """Why a command engine may not be ready, and what it wrote."""
    if child.spec.command is None:
        return ""
    return (
        "; the engine command is running but the router has no LOAD snapshot from it with "
        "the stack key (docs/engine.md: an engine publishes its load at start, its "
        "secret the key in SWITCHBOARD_STACK_KEY)" + child.exit_context(wait_s=0.0)
    )
