"""Which worker served a request: the process holding the server side of its connection.

The workers share one port (SO_REUSEPORT), so a client cannot choose one, and no answer
names its worker. The kernel knows: :class:`ConnectionCensus` reads which worker process
accepted each client port (``/proc``, through psutil), at most once per
:data:`REFRESH_S`, and a request looks its own port up once its response has started.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.fault.harness.procfs import server_ports

__all__ = ["REFRESH_S", "ConnectionCensus"]

#: A lookup within this many seconds of the last read uses it (requests live longer).
REFRESH_S = 0.05


class ConnectionCensus:
    """Client port -> worker role name, from the workers' accepted connections on ``port``.

    ``workers`` returns the live worker role names and pids (it is called at each read,
    so a restarted worker's new pid is found).
    """

    def __init__(self, port: int, workers: Callable[[], dict[str, int]]) -> None:
        self.port = port
        self._workers = workers
        self._owners: dict[int, str] = {}
        self._read_at = float("-inf")
        self.reads = 0

    def refresh(self) -> None:
        """Read every worker's accepted connections now."""
        owners: dict[int, str] = {}
        for role, pid in self._workers().items():
            for client_port in server_ports(pid, self.port):
                owners[client_port] = role
        self._owners = owners
        self._read_at = time.monotonic()
        self.reads += 1

    def owner(self, client_port: int) -> str | None:
        """The worker that accepted ``client_port`` (re-read if stale or unknown)."""
        stale = time.monotonic() - self._read_at > REFRESH_S
        if stale or client_port not in self._owners:
            self.refresh()
        return self._owners.get(client_port)

    def snapshot(self) -> dict[int, str]:
        """Every connection's owner as of a fresh read (taken at a fault, say)."""
        self.refresh()
        return dict(self._owners)
