"""Tests for socket creation and the frame-level send/receive primitives."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from router_core import fastpath, transport
from router_core.endpoints import EndpointError
from router_core.transport import (
    DEFAULT_HWM,
    MAX_FRAMES,
    MalformedMessage,
    bind,
    close_bound,
    connect,
    recv_message,
    send_frames,
)
from tests.support.eventually import wait_until
from tests.support.zmq_context import bounded_context

WAIT_MS = 2000


class RecordingContext:
    """A real context that remembers every socket it made, to check none is left open."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self.made: list[zmq.Socket[bytes]] = []

    def socket(self, socket_type: int) -> zmq.Socket[bytes]:
        sock = self._context.socket(socket_type)
        self.made.append(sock)
        return sock

    def close(self) -> None:
        for sock in self.made:
            sock.close(linger=0)


@pytest.fixture
def context() -> Iterator[RecordingContext]:
    """This test's own bounded context; every socket made on it is closed with linger 0."""
    with bounded_context() as ctx:
        recording = RecordingContext(ctx)
        yield recording
        recording.close()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A short directory for ipc socket files."""
    path = Path(tempfile.mkdtemp(prefix="sb-tr-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["pyzmq", "native"])
def frame_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test over both ways of moving frames: plain pyzmq, and the C extension."""
    if request.param == "pyzmq":
        monkeypatch.setattr(transport, "native", lambda: None, raising=False)
    elif fastpath.native() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true: the C frame path must be tested")
        pytest.skip("the C extension is not available here")
    return str(request.param)


def as_bytes(frame: bytes | zmq.Frame) -> bytes:
    """A frame's contents, whether it came back as bytes or as a zmq.Frame."""
    return frame if isinstance(frame, bytes) else frame.bytes


def ctx(recording: RecordingContext) -> Any:
    """The recording context, typed loosely for the transport functions."""
    return recording


def pipe(recording: RecordingContext, name: str) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    """A connected inproc PUSH -> PULL pair."""
    pull = bind(ctx(recording), zmq.PULL, f"inproc://{name}")
    push = connect(ctx(recording), zmq.PUSH, f"inproc://{name}")
    return push, pull


def wait_readable(sock: zmq.Socket[bytes]) -> None:
    """Wait for input, or fail instead of hanging."""
    if not sock.poll(WAIT_MS, zmq.POLLIN):
        pytest.fail(f"no input within {WAIT_MS} ms")


@pytest.mark.usefixtures("frame_path")
class TestRecvMessage:
    """recv_message: header bytes plus payload frames, and the frame limit."""

    def test_header_bytes_and_payload_frames(
        self, context: RecordingContext, frame_path: str
    ) -> None:
        """The header comes back as bytes and every payload frame intact (zmq.Frame in pyzmq)."""
        push, pull = pipe(context, "shape")
        push.send_multipart([b"head", b"one", b"two"])
        wait_readable(pull)
        frames = recv_message(pull)
        assert isinstance(frames[0], bytes) and frames[0] == b"head"
        assert [as_bytes(frame) for frame in frames[1:]] == [b"one", b"two"]
        if frame_path == "pyzmq":
            assert all(isinstance(frame, zmq.Frame) for frame in frames[1:])

    def test_single_frame_message(self, context: RecordingContext) -> None:
        """A one-frame message is just its header."""
        push, pull = pipe(context, "single")
        push.send(b"only")
        wait_readable(pull)
        assert recv_message(pull) == [b"only"]

    def test_empty_socket_raises_again(self, context: RecordingContext) -> None:
        """With nothing waiting, recv_message raises zmq.Again without blocking."""
        _, pull = pipe(context, "empty")
        with pytest.raises(zmq.Again):
            recv_message(pull)

    def test_exactly_max_frames_is_accepted(self, context: RecordingContext) -> None:
        """A message of MAX_FRAMES frames is received whole."""
        push, pull = pipe(context, "max")
        push.send_multipart([b"h", *(b"x" for _ in range(MAX_FRAMES - 1))])
        wait_readable(pull)
        assert len(recv_message(pull)) == MAX_FRAMES

    @pytest.mark.parametrize("extra", [1, 50])
    def test_too_many_frames_is_consumed_and_next_is_intact(
        self, context: RecordingContext, extra: int
    ) -> None:
        """Over MAX_FRAMES raises too_many_frames after consuming it; the next message is whole."""
        push, pull = pipe(context, f"over{extra}")
        push.send_multipart([b"big", *(b"x" for _ in range(MAX_FRAMES - 1 + extra))])
        push.send_multipart([b"next", b"payload"])
        wait_readable(pull)
        with pytest.raises(MalformedMessage) as info:
            recv_message(pull)
        assert info.value.reason == "too_many_frames"
        assert not pull.getsockopt(zmq.RCVMORE)
        wait_readable(pull)
        frames = recv_message(pull)
        assert frames[0] == b"next"
        assert [as_bytes(f) for f in frames[1:]] == [b"payload"]


@pytest.mark.usefixtures("frame_path")
class TestSendFrames:
    """send_frames: non-blocking, atomic, False on EAGAIN."""

    @pytest.mark.parametrize("count", [1, 2, 5])
    def test_sends_whole_message(self, context: RecordingContext, count: int) -> None:
        """Bytes and zmq.Frame frames arrive as one message, in order."""
        push, pull = pipe(context, f"send{count}")
        frames: list[bytes | zmq.Frame] = [b"h"]
        frames += [zmq.Frame(f"p{i}".encode()) for i in range(count - 1)]
        assert send_frames(push, frames) is True
        wait_readable(pull)
        assert pull.recv_multipart() == [b"h", *(f"p{i}".encode() for i in range(count - 1))]

    def test_returns_false_on_eagain(self, context: RecordingContext, run_dir: Path) -> None:
        """With no peer (ZMQ_IMMEDIATE) the send is refused at once, not queued or blocked."""
        push = connect(ctx(context), zmq.PUSH, f"ipc://{run_dir}/nobody")
        assert send_frames(push, [b"h", b"p"]) is False
        assert send_frames(push, [b"h"]) is False


class TestSocketCreation:
    """bind/connect apply options and refuse endpoints beyond loopback."""

    def test_bind_applies_options(self, context: RecordingContext) -> None:
        """A bound socket has the requested HWMs and linger."""
        sock = bind(ctx(context), zmq.PULL, "inproc://opts", hwm=7, linger_ms=3)
        assert sock.getsockopt(zmq.SNDHWM) == 7
        assert sock.getsockopt(zmq.RCVHWM) == 7
        assert sock.getsockopt(zmq.LINGER) == 3

    def test_connect_defaults(self, context: RecordingContext) -> None:
        """connect() sets the default HWM, linger 0 and ZMQ_IMMEDIATE."""
        sock = connect(ctx(context), zmq.PUSH, "inproc://defaults")
        assert sock.getsockopt(zmq.SNDHWM) == DEFAULT_HWM
        assert sock.getsockopt(zmq.LINGER) == 0
        assert sock.getsockopt(zmq.IMMEDIATE) == 1
        lax = connect(ctx(context), zmq.PUSH, "inproc://defaults", immediate=False)
        assert lax.getsockopt(zmq.IMMEDIATE) == 0

    @pytest.mark.parametrize("endpoint", ["tcp://0.0.0.0:5555", "tcp://*:5555", "udp://x"])
    def test_bind_refuses_beyond_loopback(self, context: RecordingContext, endpoint: str) -> None:
        """Binding a wildcard or unknown endpoint raises EndpointError before any socket."""
        with pytest.raises(EndpointError):
            bind(ctx(context), zmq.PULL, endpoint)
        assert context.made == []

    def test_allow_remote_lifts_the_check(self, context: RecordingContext) -> None:
        """With allow_remote a non-loopback address reaches zmq's bind (which fails here)."""
        # 192.0.2.1 is TEST-NET-1: never a local address, so nothing is actually exposed.
        with pytest.raises(zmq.ZMQError):
            bind(ctx(context), zmq.PULL, "tcp://192.0.2.1:5555", allow_remote=True)
        assert context.made[0].closed

    def test_bind_loopback_tcp(self, context: RecordingContext) -> None:
        """A loopback TCP endpoint binds."""
        sock = bind(ctx(context), zmq.ROUTER, "tcp://127.0.0.1:*")
        assert sock.getsockopt_string(zmq.LAST_ENDPOINT).startswith("tcp://127.0.0.1:")


class TestCloseBound:
    """close_bound closes the socket and removes the ipc socket file."""

    def test_removes_ipc_socket_file(self, context: RecordingContext, run_dir: Path) -> None:
        """The ipc socket file that libzmq leaves is removed."""
        path = run_dir / "bound"
        sock = bind(ctx(context), zmq.PULL, f"ipc://{path}")
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        close_bound(sock, f"ipc://{path}")
        assert sock.closed
        assert not path.exists()

    def test_leaves_a_regular_file(self, context: RecordingContext, run_dir: Path) -> None:
        """A path that is not a socket is never deleted; a missing one is fine."""
        regular = run_dir / "regular"
        regular.write_text("keep")
        sock = bind(ctx(context), zmq.PULL, "inproc://other")
        close_bound(sock, f"ipc://{regular}")
        assert regular.read_text() == "keep"
        close_bound(sock, f"ipc://{run_dir}/missing")

    def test_non_ipc_just_closes(self, context: RecordingContext) -> None:
        """For other schemes close_bound only closes the socket."""
        sock = bind(ctx(context), zmq.PULL, "inproc://plain")
        close_bound(sock, "inproc://plain")
        assert sock.closed


BOTH_PATHS_ERRORS = pytest.mark.parametrize("frame_path", ["pyzmq", "native"], indirect=True)


class TestErrors:
    """Failures other than EAGAIN surface as zmq errors, whichever path moves the frames."""

    @BOTH_PATHS_ERRORS
    def test_closed_socket_raises_zmq_error(
        self, context: RecordingContext, frame_path: str
    ) -> None:
        """recv_message and send_frames on a closed socket raise zmq.ZMQError (ENOTSOCK)."""
        push, pull = pipe(context, "closed")
        push.close(linger=0)
        pull.close(linger=0)
        with pytest.raises(zmq.ZMQError) as info:
            recv_message(pull)
        assert info.value.errno == zmq.ENOTSOCK
        with pytest.raises(zmq.ZMQError):
            send_frames(push, [b"h", b"p"])

    @BOTH_PATHS_ERRORS
    def test_terminated_context_raises_context_terminated(self, frame_path: str) -> None:
        """Once the context is terminating, recv_message raises zmq.ContextTerminated."""
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        pull = bind(ctx, zmq.PULL, "inproc://terminating")
        terminator = threading.Thread(target=ctx.term)
        terminator.start()

        def received() -> object:
            try:
                return recv_message(pull)
            except zmq.Again:
                return None

        try:
            with pytest.raises(zmq.ContextTerminated):
                wait_until(received, WAIT_MS / 1000, "ContextTerminated", interval=0.001)
        finally:
            pull.close(linger=0)
            terminator.join(WAIT_MS / 1000)
        assert not terminator.is_alive()


class TestIpcTakeover:
    """bind() never steals an ipc:// path from a process that is listening on it."""

    def test_live_ipc_path_is_refused(self, context: RecordingContext) -> None:
        """A second bind on a path with a live listener fails with EADDRINUSE."""
        run_dir = tempfile.mkdtemp(prefix="sb-ipc-")
        endpoint = f"ipc://{run_dir}/taken"
        first = bind(ctx(context), zmq.PULL, endpoint)
        try:
            with pytest.raises(zmq.ZMQError) as info:
                bind(ctx(context), zmq.PULL, endpoint)
            assert info.value.errno == errno.EADDRINUSE
        finally:
            close_bound(first, endpoint)
            os.rmdir(run_dir)

    def test_stale_ipc_file_is_replaced(self, context: RecordingContext) -> None:
        """A socket file nobody listens on (a killed process's) does not block a bind."""
        run_dir = tempfile.mkdtemp(prefix="sb-ipc-")
        path = os.path.join(run_dir, "stale")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)
        stale.close()  # the file stays, with no listener behind it
        endpoint = f"ipc://{path}"
        sock = bind(ctx(context), zmq.PULL, endpoint)
        close_bound(sock, endpoint)
        os.rmdir(run_dir)
