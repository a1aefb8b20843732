"""Real control sockets answering canned replies from a thread, for the admin app's unit
tests: :class:`CannedControlServer` serves any command table, :class:`SnapshotServer`
the routers' ``metrics`` command with a canned snapshot (what the scrapes read)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import msgspec
import zmq

from router_core.control import Command, ControlServer
from router_core.counters import Counters
from router_core.transport import bind, close_bound

__all__ = ["WAIT_S", "CannedControlServer", "SnapshotServer"]

WAIT_S = 5.0


class CannedControlServer:
    """A real control socket at ``endpoint`` serving ``commands`` (with ``state`` as the
    server's owner) from a thread, between ``__enter__`` and ``__exit__``."""

    def __init__(
        self, endpoint: str, commands: Mapping[str, Command[Any]], state: Any = None
    ) -> None:
        self.endpoint = endpoint
        self._commands = dict(commands)
        self._state = state
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="canned-control")

    def _run(self) -> None:
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        sock = bind(context, zmq.ROUTER, self.endpoint)
        try:
            server = ControlServer(sock, self._state, self._commands, Counters())
            self._ready.set()
            while not self._stop.is_set():
                if sock.poll(20, zmq.POLLIN):
                    server.handle_ready()
        finally:
            close_bound(sock, self.endpoint)
            context.destroy(linger=0)

    def __enter__(self) -> CannedControlServer:
        self._thread.start()
        assert self._ready.wait(WAIT_S), (
            f"the canned control server at {self.endpoint} did not start"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()


class SnapshotServer(CannedControlServer):
    """A real control socket answering ``metrics`` with a canned snapshot, from a thread."""

    def __init__(self, endpoint: str, snapshot: Mapping[str, Any]) -> None:
        commands = {"metrics": Command(lambda state, args, reply_to: state, _NoArgs, "m")}
        super().__init__(endpoint, commands, dict(snapshot))
        self.snapshot = snapshot


class _NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass
