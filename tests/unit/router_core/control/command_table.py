"""What the control-socket tests serve and speak with: a tiny command table, a server
pumped by the test's own thread or run in a thread of its own, raw client sockets, and
request frames."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
import zmq

from router_core.control import (
    DEFERRED,
    Command,
    ControlError,
    ControlRequest,
    ControlServer,
    ErrorCode,
    ReplyTo,
)
from router_core.control.guard import ControlGuard
from router_core.control.protocol import encode
from router_core.counters import Counters
from router_core.transport import bind, close_bound

__all__ = [
    "COMMANDS",
    "WAIT_MS",
    "WAIT_S",
    "Clients",
    "InlineServer",
    "TableState",
    "ThreadServer",
    "receive",
    "request",
    "run_async",
]

WAIT_MS = 2000
WAIT_S = WAIT_MS / 1000

# ------------------------------------------------------------------ a tiny command table


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class AddArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"a": int, "b": int}``."""

    a: int
    b: int


class HoldArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"value": int, "count": int}``: defer; answer all held once ``count`` are held."""

    value: int
    count: int = 0


class ValueArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"value": int}``."""

    value: int


@dataclass
class TableState:
    """What the tiny command table works on: the server (to answer) and held requests."""

    server: ControlServer[TableState] | None = None
    held: list[tuple[ReplyTo, int]] = field(default_factory=list)


def add(state: TableState, args: AddArgs, reply_to: ReplyTo) -> Any:
    """The sum of a and b."""
    return args.a + args.b


def nothing(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """No result."""
    return None


def missing(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """Always NOT_FOUND."""
    raise ControlError(ErrorCode.NOT_FOUND, "no such thing")


def crash(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """A handler bug."""
    raise RuntimeError("handler bug")


def opaque(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """A handler bug: a result msgspec cannot encode."""
    return object()


def hold(state: TableState, args: HoldArgs, reply_to: ReplyTo) -> Any:
    """Defer; once ``count`` requests are held, answer them all, newest first."""
    state.held.append((reply_to, args.value))
    if args.count and len(state.held) >= args.count:
        assert state.server is not None
        for held_reply_to, value in reversed(state.held):
            state.server.answer(held_reply_to, value)
        state.held.clear()
    return DEFERRED


def release(state: TableState, args: ValueArgs, reply_to: ReplyTo) -> Any:
    """Answer every held request (oldest first), then return ``value``."""
    assert state.server is not None
    for held_reply_to, value in state.held:
        state.server.answer(held_reply_to, value)
    state.held.clear()
    return args.value


COMMANDS: Mapping[str, Command[TableState]] = {
    "add": Command(add, AddArgs, "add two ints"),
    "nothing": Command(nothing, NoArgs, "return None"),
    "missing": Command(missing, NoArgs, "raise NOT_FOUND"),
    "crash": Command(crash, NoArgs, "raise RuntimeError"),
    "opaque": Command(opaque, NoArgs, "return something unencodable"),
    "hold": Command(hold, HoldArgs, "defer the answer"),
    "release": Command(release, ValueArgs, "answer held requests"),
}

# ------------------------------------------------------------------ servers and clients


class InlineServer:
    """A ControlServer on an inproc ROUTER, driven by the test's own thread; ``commands``
    (default :data:`COMMANDS`) and ``guard`` (default: none) as the server takes them."""

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        endpoint: str,
        commands: Mapping[str, Command[TableState]] = COMMANDS,
        guard: ControlGuard | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.counters = Counters()
        self.state = TableState()
        self.socket = bind(context, zmq.ROUTER, endpoint)
        self.server = ControlServer(self.socket, self.state, commands, self.counters, guard)
        self.state.server = self.server

    def pump(self) -> None:
        """Wait for requests, then serve one budget of them."""
        if not self.socket.poll(WAIT_MS, zmq.POLLIN):
            pytest.fail("the server got no request")
        self.server.handle_ready()

    def close(self) -> None:
        close_bound(self.socket, self.endpoint)


class ThreadServer:
    """A ControlServer serving an ipc ROUTER from its own thread, for blocking clients.

    The socket is created, used and closed only in that thread. ``guard`` as the
    server takes it.
    """

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        endpoint: str,
        guard: ControlGuard | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.counters = Counters()
        self.state = TableState()
        self._guard = guard
        self._context = context
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control-server")

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(WAIT_S), "server did not start"

    def _run(self) -> None:
        sock = bind(self._context, zmq.ROUTER, self.endpoint)
        try:
            server = ControlServer(sock, self.state, COMMANDS, self.counters, self._guard)
            self.state.server = server
            self._ready.set()
            while not self._stop.is_set():
                if sock.poll(20, zmq.POLLIN):
                    server.handle_ready()
        finally:
            close_bound(sock, self.endpoint)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "server thread did not stop"


class Clients:
    """Raw client sockets owned by one test, closed with linger 0 at teardown."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._sockets: list[zmq.Socket[bytes]] = []

    def connect(self, socket_type: int, endpoint: str) -> zmq.Socket[bytes]:
        """A raw ``socket_type`` socket connected to ``endpoint``."""
        sock = self._context.socket(socket_type)
        self._sockets.append(sock)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
        return sock

    def close(self) -> None:
        for sock in self._sockets:
            sock.close(linger=0)


def receive(sock: zmq.Socket[bytes]) -> list[bytes]:
    """One reply message, or fail instead of hanging."""
    if not sock.poll(WAIT_MS, zmq.POLLIN):
        pytest.fail(f"no reply within {WAIT_MS} ms")
    return sock.recv_multipart()


def request(request_id: int, command: str, *, key: str = "", actor: str = "", **args: Any) -> bytes:
    """An encoded request frame (with ``key`` and ``actor`` when given)."""
    return encode(ControlRequest(id=request_id, command=command, args=args, key=key, actor=actor))


def run_async(scenario: Any) -> Any:
    """Run a coroutine on a fresh event loop."""
    return asyncio.run(asyncio.wait_for(scenario, 10))
