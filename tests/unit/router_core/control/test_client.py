"""Tests for the control socket: reply helpers, the server's dispatch and both clients."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq
import zmq.asyncio

from router_core.control import (
    DEFERRED,
    AsyncControlClient,
    Command,
    ControlClient,
    ControlError,
    ControlReply,
    ControlRequest,
    ControlServer,
    ControlTimeout,
    ErrorCode,
    ReplyTo,
)
from router_core.control.protocol import (
    ErrorBody,
    decode_reply,
    decode_request,
    encode,
    error,
    ok,
)
from router_core.counters import Counters
from router_core.transport import bind, close_bound

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

# ------------------------------------------------------------------ fixtures


class InlineServer:
    """A ControlServer on an inproc ROUTER, driven by the test's own thread."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self.endpoint = endpoint
        self.counters = Counters()
        self.state = TableState()
        self.socket = bind(context, zmq.ROUTER, endpoint)
        self.server = ControlServer(self.socket, self.state, COMMANDS, self.counters)
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

    The socket is created, used and closed only in that thread.
    """

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self.endpoint = endpoint
        self.counters = Counters()
        self.state = TableState()
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
            server = ControlServer(sock, self.state, COMMANDS, self.counters)
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


@pytest.fixture
def inline(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[InlineServer]:
    """A server the test pumps by hand."""
    server = InlineServer(context, "inproc://control")
    yield server
    server.close()


@pytest.fixture
def served(context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> Iterator[ThreadServer]:
    """A server running in a thread on an ipc endpoint."""
    server = ThreadServer(context, f"ipc://{run_dir}/control")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(
    served: ThreadServer, context: zmq.Context[zmq.Socket[bytes]]
) -> Iterator[ControlClient]:
    """A blocking client of the threaded server."""
    with ControlClient(served.endpoint, timeout_s=WAIT_S, context=context) as sync_client:
        yield sync_client


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


@pytest.fixture
def clients(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Clients]:
    """This test's raw client sockets."""
    owned = Clients(context)
    yield owned
    owned.close()


def receive(sock: zmq.Socket[bytes]) -> list[bytes]:
    """One reply message, or fail instead of hanging."""
    if not sock.poll(WAIT_MS, zmq.POLLIN):
        pytest.fail(f"no reply within {WAIT_MS} ms")
    return sock.recv_multipart()


def request(request_id: int, command: str, **args: Any) -> bytes:
    """An encoded request frame."""
    return encode(ControlRequest(id=request_id, command=command, args=args))


def run_async(scenario: Any) -> Any:
    """Run a coroutine on a fresh event loop."""
    return asyncio.run(asyncio.wait_for(scenario, 10))


# ------------------------------------------------------------------ tests


class TestProtocol:
    """ok()/error() and the frame codec."""

    def test_ok_shape(self) -> None:
        """ok() carries the id and result, no error; the frame omits defaults."""
        reply = ok(3, {"a": 1})
        assert reply == ControlReply(id=3, ok=True, result={"a": 1}, error=None)
        assert msgspec.msgpack.decode(encode(ok(4))) == {"id": 4, "ok": True}
        assert decode_reply(encode(reply)) == reply

    def test_error_shape(self) -> None:
        """error() carries the numbered code, its name and the message, no result."""
        reply = error(5, ErrorCode.NOT_FOUND, "no worker 'x'")
        assert reply.ok is False
        assert reply.result is None
        assert reply.error == ErrorBody(code=4, name="NOT_FOUND", message="no worker 'x'")
        assert decode_reply(encode(reply)) == reply

    def test_error_codes_are_stable(self) -> None:
        """The documented code numbers never move."""
        assert {code.name: code.value for code in ErrorCode} == {
            "BAD_REQUEST": 1,
            "UNKNOWN_COMMAND": 2,
            "BAD_ARGUMENTS": 3,
            "NOT_FOUND": 4,
            "CONFLICT": 5,
            "INTERNAL": 6,
            "TIMEOUT": 7,
        }

    def test_request_roundtrip_and_garbage(self) -> None:
        """A request frame round-trips; garbage raises msgspec.DecodeError."""
        frame = request(9, "add", a=1, b=2)
        assert decode_request(frame) == ControlRequest(id=9, command="add", args={"a": 1, "b": 2})
        with pytest.raises(msgspec.DecodeError):
            decode_request(b"\xc1not msgpack")

    def test_control_timeout_is_a_control_error(self) -> None:
        """ControlTimeout is a ControlError with code TIMEOUT."""
        exc = ControlTimeout("late")
        assert isinstance(exc, ControlError)
        assert exc.code is ErrorCode.TIMEOUT
        assert exc.message == "late"


class TestControlServer:
    """ControlServer driven by raw DEALER and REQ sockets."""

    def test_dealer_request_gets_reply(self, inline: InlineServer, clients: Clients) -> None:
        """A DEALER request is answered with the same id, and the command is counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(7, "add", a=2, b=3))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(7, 5)
        assert inline.counters.get("control_commands", "add") == 1

    def test_request_past_its_deadline_is_dropped(
        self, inline: InlineServer, clients: Clients
    ) -> None:
        """A request read after its deadline is not run nor answered, only counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        late = ControlRequest(id=3, command="add", args={"a": 1, "b": 1}, deadline_ns=1)
        sock.send(encode(late))
        sock.send(request(4, "add", a=2, b=2))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(4, 4)
        assert inline.counters.get("rejected", "control_expired") == 1
        assert inline.counters.get("control_commands", "add") == 1

    def test_req_socket_with_empty_delimiter(self, inline: InlineServer, clients: Clients) -> None:
        """A REQ client (identity, empty delimiter, request) gets its reply."""
        sock = clients.connect(zmq.REQ, inline.endpoint)
        sock.send(request(1, "add", a=40, b=2))
        inline.pump()
        frames = receive(sock)
        assert len(frames) == 1
        assert decode_reply(frames[0]) == ok(1, 42)

    @pytest.mark.parametrize(
        "frame", [b"\xc1garbage", msgspec.msgpack.encode({"not": "a request"}), b""]
    )
    def test_garbage_frame_gets_bad_request(
        self, inline: InlineServer, clients: Clients, frame: bytes
    ) -> None:
        """A frame that is not a ControlRequest gets BAD_REQUEST with id 0, and is counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(frame)
        inline.pump()
        reply = decode_reply(receive(sock)[-1])
        assert (reply.id, reply.ok) == (0, False)
        assert reply.error is not None and reply.error.code == ErrorCode.BAD_REQUEST
        assert inline.counters.get("rejected", "control_request") == 1

    @pytest.mark.parametrize("extra", [[b"not-empty"], [b"", b"x"]])
    def test_bad_envelope_gets_bad_request(
        self,
        inline: InlineServer,
        clients: Clients,
        extra: list[bytes],
    ) -> None:
        """Extra frames that are not a REQ delimiter are refused with BAD_REQUEST."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send_multipart([*extra, request(1, "add", a=1, b=1)])
        inline.pump()
        frames = receive(sock)
        assert frames[:-1] == extra
        reply = decode_reply(frames[-1])
        assert reply.error is not None and reply.error.code == ErrorCode.BAD_REQUEST
        assert inline.counters.get("rejected", "control_envelope") == 1
        assert inline.counters.total("control_commands") == 0

    def test_deferred_then_answer(self, inline: InlineServer, clients: Clients) -> None:
        """A DEFERRED handler sends nothing; answer() later replies to the right request id."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(1, "hold", value=11))
        inline.pump()
        assert len(inline.state.held) == 1
        assert not sock.poll(0, zmq.POLLIN)
        sock.send(request(2, "release", value=22))
        inline.pump()
        replies = [decode_reply(receive(sock)[-1]) for _ in range(2)]
        assert replies == [ok(1, 11), ok(2, 22)]

    def test_unencodable_result_is_internal(self, inline: InlineServer, clients: Clients) -> None:
        """A handler result that cannot be encoded is answered INTERNAL; serving goes on."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(1, "opaque"))
        inline.pump()
        reply = decode_reply(receive(sock)[-1])
        assert reply.error is not None and reply.error.code == ErrorCode.INTERNAL
        sock.send(request(2, "add", a=1, b=1))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(2, 2)

    def test_serves_a_bounded_budget_per_call(self, inline: InlineServer, clients: Clients) -> None:
        """One handle_ready() serves at most its budget; the rest wait for the next call."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        for request_id in range(1, 71):
            sock.send(request(request_id, "nothing"))
        inline.pump()
        assert inline.counters.get("control_commands", "nothing") == 64
        inline.pump()
        assert inline.counters.get("control_commands", "nothing") == 70
        ids = [decode_reply(receive(sock)[-1]).id for _ in range(70)]
        assert ids == list(range(1, 71))


class TestControlClient:
    """The blocking client against a threaded server."""

    def test_success(self, client: ControlClient) -> None:
        """call() returns the handler's result."""
        assert client.call("add", a=2, b=3) == 5
        assert client.call("nothing") is None

    def test_unknown_command(self, client: ControlClient) -> None:
        """An unknown command raises UNKNOWN_COMMAND naming the known ones."""
        with pytest.raises(ControlError) as info:
            client.call("frobnicate")
        assert info.value.code is ErrorCode.UNKNOWN_COMMAND
        assert "add" in info.value.message

    @pytest.mark.parametrize(
        "args", [{"a": "x", "b": 1}, {"a": 1}, {"a": 1, "b": 2, "c": 3}], ids=str
    )
    def test_bad_arguments(
        self, client: ControlClient, served: ThreadServer, args: dict[str, Any]
    ) -> None:
        """Arguments that fail msgspec validation raise BAD_ARGUMENTS."""
        with pytest.raises(ControlError) as info:
            client.call("add", **args)
        assert info.value.code is ErrorCode.BAD_ARGUMENTS
        assert info.value.message.startswith("add: ")
        assert served.counters.get("rejected", "control_arguments") == 1

    def test_handler_control_error_keeps_its_code(self, client: ControlClient) -> None:
        """A ControlError raised by a handler reaches the client with its code and message."""
        with pytest.raises(ControlError) as info:
            client.call("missing")
        assert info.value.code is ErrorCode.NOT_FOUND
        assert info.value.message == "no such thing"

    def test_handler_bug_is_internal_and_server_keeps_serving(
        self, client: ControlClient, served: ThreadServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A handler raising RuntimeError gives INTERNAL, is logged, and the server goes on."""
        with caplog.at_level(logging.ERROR, logger="router_core.control.server"):
            with pytest.raises(ControlError) as info:
                client.call("crash")
            assert client.call("add", a=1, b=1) == 2
        assert info.value.code is ErrorCode.INTERNAL
        assert served.counters.get("control_errors", "crash") == 1
        assert any(record.exc_info for record in caplog.records)

    def test_timeout_and_late_reply_not_handed_on(self, client: ControlClient) -> None:
        """A timed-out call raises ControlTimeout; its late reply is not handed to the next call."""
        with pytest.raises(ControlTimeout) as info:
            client.call("hold", value=111, reply_timeout_s=0.2)
        assert info.value.code is ErrorCode.TIMEOUT
        # release answers the held request (the late reply) before its own reply.
        assert client.call("release", value=222) == 222
        assert client.call("add", a=1, b=2) == 3

    def test_reconnects_after_close(self, client: ControlClient) -> None:
        """A closed client reconnects on its next call."""
        assert client.call("add", a=1, b=1) == 2
        client.close()
        assert client.call("add", a=2, b=2) == 4


class TestAsyncControlClient:
    """The asyncio client: concurrent calls share one socket, replies matched by id."""

    def test_success_and_errors(self, served: ThreadServer) -> None:
        """Results come back; error replies raise ControlError with their code."""

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(served.endpoint, context=actx) as client:
                    assert await client.call("add", a=20, b=22) == 42
                    with pytest.raises(ControlError) as info:
                        await client.call("missing")
                    assert info.value.code is ErrorCode.NOT_FOUND
                    with pytest.raises(ControlError) as info:
                        await client.call("add", a="x", b=1)
                    assert info.value.code is ErrorCode.BAD_ARGUMENTS
            finally:
                actx.destroy(linger=0)

        run_async(scenario())

    def test_fifty_concurrent_calls_matched_by_id(self, served: ThreadServer) -> None:
        """50 concurrent calls, answered in reverse order, each get their own result."""
        count = 50

        async def scenario() -> list[int]:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(
                    served.endpoint, context=actx, timeout_s=WAIT_S * 2
                ) as client:
                    return list(
                        await asyncio.gather(
                            *(client.call("hold", value=i, count=count) for i in range(count))
                        )
                    )
            finally:
                actx.destroy(linger=0)

        assert run_async(scenario()) == list(range(count))

    def test_timeout_then_late_reply_dropped(self, served: ThreadServer) -> None:
        """A timed-out call raises ControlTimeout and its late reply reaches nobody else."""

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(served.endpoint, context=actx) as client:
                    with pytest.raises(ControlTimeout):
                        await client.call("hold", value=1, reply_timeout_s=0.2)
                    assert await client.call("release", value=2) == 2
            finally:
                actx.destroy(linger=0)

        run_async(scenario())

    def test_reader_skips_garbage_and_maps_unknown_codes(self, run_dir: Path) -> None:
        """Undecodable frames and unknown ids are skipped; an unknown error code is INTERNAL."""
        endpoint = f"ipc://{run_dir}/raw"

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                router = actx.socket(zmq.ROUTER)
                router.setsockopt(zmq.LINGER, 0)
                router.bind(endpoint)
                async with AsyncControlClient(endpoint, context=actx) as client:
                    call = asyncio.ensure_future(client.call("anything"))
                    identity, frame = await asyncio.wait_for(router.recv_multipart(), WAIT_S)
                    request_id = decode_request(frame).id
                    odd = ControlReply(
                        id=request_id, ok=False, error=ErrorBody(code=99, name="NEW", message="m")
                    )
                    await router.send_multipart([identity, b"\xc1garbage"])
                    await router.send_multipart([identity, encode(ok(request_id + 100, "x"))])
                    await router.send_multipart([identity, encode(odd)])
                    with pytest.raises(ControlError) as info:
                        await call
                    assert info.value.code is ErrorCode.INTERNAL
                    assert info.value.message == "m"
            finally:
                actx.destroy(linger=0)

        run_async(scenario())
