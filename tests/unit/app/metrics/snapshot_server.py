"""A real control socket answering the routers' ``metrics`` command with a canned snapshot,
from a thread: what the admin app's scrapes read in the unit tests."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import msgspec
import zmq

from router_core.control import Command, ControlServer
from router_core.counters import Counters
from router_core.transport import bind, close_bound

__all__ = ["WAIT_S", "SnapshotServer"]

WAIT_S = 5.0


class SnapshotServer:
    """A real control socket answering ``metrics`` with a canned snapshot, from a thread."""

    def __init__(self, endpoint: str, snapshot: Mapping[str, Any]) -> None:
        self.endpoint = endpoint
        self.snapshot = snapshot
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-server")

    def _run(self) -> None:
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        sock = bind(context, zmq.ROUTER, self.endpoint)
        try:
            commands = {"metrics": Command(lambda state, args, reply_to: state, _NoArgs, "m")}
            server = ControlServer(sock, dict(self.snapshot), commands, Counters())
            self._ready.set()
            while not self._stop.is_set():
                if sock.poll(20, zmq.POLLIN):
                    server.handle_ready()
        finally:
            close_bound(sock, self.endpoint)
            context.destroy(linger=0)

    def __enter__(self) -> SnapshotServer:
        self._thread.start()
        assert self._ready.wait(WAIT_S), "the snapshot server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()


class _NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass
