"""Reading the stand-ins' reports: MessagePack maps PUSHed to a socket the test binds."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec
import zmq

from router_core.transport import close_bound
from tests.integration.harness.polling import wait_until

__all__ = ["ReportCollector"]


class ReportCollector:
    """A thread reading the stand-ins' reports from a PULL socket the test owns.

    Keeps the latest report per stand-in and a history of each (without the bulky
    per-rid maps).
    """

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self.endpoint = endpoint
        self._socket = context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(endpoint)
        self._decoder = msgspec.msgpack.Decoder()
        self._lock = threading.Lock()
        self._latest: dict[str, dict[str, Any]] = {}
        self._history: dict[str, list[dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="report-collector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self._socket
        try:
            while not self._stop.is_set():
                if not sock.poll(50):
                    continue
                while True:
                    try:
                        frame = sock.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    report = self._decoder.decode(frame)
                    slim = {k: v for k, v in report.items() if k != "rows_by_rid"}
                    with self._lock:
                        self._latest[report["id"]] = report
                        self._history.setdefault(report["id"], []).append(slim)
        finally:
            close_bound(sock, self.endpoint)

    def latest(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._latest.get(name)

    def history(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._history.get(name, ()))

    def get(self, name: str, key: str, default: Any = None) -> Any:
        report = self.latest(name)
        return default if report is None else report.get(key, default)

    def wait_for(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], Any],
        timeout: float,
        what: str,
    ) -> dict[str, Any]:
        """Wait until the latest report of ``name`` satisfies ``predicate``; return it."""

        def check() -> dict[str, Any] | None:
            report = self.latest(name)
            return report if report is not None and predicate(report) else None

        return wait_until(
            check, timeout, lambda: f"{name}: {what}; last report {self.latest(name)}"
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
