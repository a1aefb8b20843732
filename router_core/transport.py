"""Socket creation and the frame-level send/receive primitives routers build on.

This module knows sockets and frames, never routing policy. pyzmq's multipart helpers
cost several microseconds per message in option lookups, so these primitives move a
whole message per call through the C fast path when it is available, and otherwise call
``send``/``recv`` per frame, reading the "more" flag from the frame just received.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Callable, Sequence
from typing import Final

import zmq

from router_core.endpoints import check_endpoint
from router_core.fastpath import as_zmq_error, native
from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM, MAX_FRAME_BYTES

__all__ = [
    "DEFAULT_BACKLOG",
    "DEFAULT_HWM",
    "MAX_FRAMES",
    "FrameLike",
    "MalformedMessage",
    "bind",
    "close_bound",
    "connect",
    "ipc_in_use",
    "recv_message",
    "send_frames",
]


#: More frames than this in one message is malformed (a batch row per request, and no
#: engine batches more than this many requests in one step).
MAX_FRAMES: Final = 4097

FrameLike = bytes | zmq.Frame

# Plain ints: combining pyzmq's enum flags with ``|`` costs more than the send itself.
_NOBLOCK: Final = int(zmq.NOBLOCK)
_SNDMORE: Final = int(zmq.SNDMORE)


class MalformedMessage(Exception):
    """A message whose frames were consumed but cannot be a protocol message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _apply_options(sock: zmq.Socket[bytes], hwm: int, linger_ms: int) -> None:
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.LINGER, linger_ms)


def bind(
    context: zmq.Context[zmq.Socket[bytes]],
    socket_type: int,
    endpoint: str,
    *,
    hwm: int = DEFAULT_HWM,
    linger_ms: int = 0,
    allow_remote: bool = False,
    prepare: Callable[[zmq.Socket[bytes]], None] | None = None,
) -> zmq.Socket[bytes]:
    """Create a socket of ``socket_type`` bound to ``endpoint`` (loopback-only by default).

    ``prepare`` sets what must be set before the bind (CURVE, :mod:`router_core.zap`).
    """
    check_endpoint(endpoint, allow_remote=allow_remote)
    if endpoint.startswith("ipc://"):
        _refuse_live_ipc(endpoint.removeprefix("ipc://"))
    sock = context.socket(socket_type)
    try:
        _apply_options(sock, hwm, linger_ms)
        # Any local process may connect to a bound socket: bound what one frame can cost.
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        if socket_type == zmq.ROUTER:
            # An unroutable reply (the client went away) is dropped, never an error.
            sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
        if prepare is not None:
            prepare(sock)
        sock.bind(endpoint)
    except BaseException:
        sock.close(linger=0)
        raise
    return sock


def ipc_in_use(path: str) -> bool:
    """Whether a running process listens on the ipc socket file ``path``."""
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return False
    except FileNotFoundError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False  # refused: stale socket file
    finally:
        probe.close()
    return True


def _refuse_live_ipc(path: str) -> None:
    """Fail if a running process listens on ``path``.

    libzmq's ipc bind silently unlinks an existing socket file and takes the path over,
    so a second router on the same run directory would steal the first one's traffic.
    A file nobody listens on (left by a killed process) is fine: bind replaces it.
    """
    if ipc_in_use(path):
        raise zmq.ZMQError(errno.EADDRINUSE, f"ipc://{path} is in use by a running process")


def close_bound(sock: zmq.Socket[bytes], endpoint: str) -> None:
    """Close a bound socket and remove its ``ipc://`` socket file, which libzmq leaves."""
    sock.close(linger=0)
    if endpoint.startswith("ipc://"):
        path = endpoint.removeprefix("ipc://")
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                os.unlink(path)
        except FileNotFoundError:
            pass


def connect(
    context: zmq.Context[zmq.Socket[bytes]],
    socket_type: int,
    endpoint: str,
    *,
    hwm: int = DEFAULT_HWM,
    linger_ms: int = 0,
    immediate: bool = True,
) -> zmq.Socket[bytes]:
    """Create a socket of ``socket_type`` connected to ``endpoint``.

    ``immediate`` (ZMQ_IMMEDIATE) keeps messages off connections that are not up, so a
    send to a peer that is gone fails fast with EAGAIN instead of queueing for whoever
    binds that path next.
    """
    sock = context.socket(socket_type)
    try:
        _apply_options(sock, hwm, linger_ms)
        sock.setsockopt(zmq.IMMEDIATE, int(immediate))
        sock.connect(endpoint)
    except BaseException:
        sock.close(linger=0)
        raise
    return sock


def recv_message(sock: zmq.Socket[bytes], max_frames: int = MAX_FRAMES) -> list[FrameLike]:
    """Receive one whole message without blocking.

    Returns ``[header_bytes, *payload_frames]`` (payload frames are ``bytes`` from the C
    fast path, else ``zmq.Frame`` so they are forwarded without a copy). Raises
    ``zmq.Again`` when no message is waiting and :class:`MalformedMessage` (after
    consuming every frame of it) for a message with more than ``max_frames`` frames
    (:data:`MAX_FRAMES`; a gateway's envelope adds frames of its own).
    """
    fast = native()
    if fast is not None:
        try:
            frames: list[FrameLike] | None = fast.recv_frames(sock.underlying, max_frames)
        except OSError as exc:
            raise as_zmq_error(exc) from exc
        if frames is None:
            raise zmq.Again()
        if len(frames) > max_frames:
            raise MalformedMessage("too_many_frames")
        return frames
    return _recv_message_pyzmq(sock, max_frames)


def _recv_message_pyzmq(sock: zmq.Socket[bytes], max_frames: int) -> list[FrameLike]:
    head = sock.recv(_NOBLOCK, copy=False)
    frames: list[FrameLike] = [head.bytes]
    last = head
    while last.more:
        if len(frames) >= max_frames:
            _discard_rest(sock)
            raise MalformedMessage("too_many_frames")
        last = sock.recv(copy=False)
        frames.append(last)
    return frames


def _discard_rest(sock: zmq.Socket[bytes]) -> None:
    while sock.getsockopt(zmq.RCVMORE):
        sock.recv()


def send_frames(sock: zmq.Socket[bytes], frames: Sequence[FrameLike]) -> bool:
    """Send one message without blocking; False if the peer's queue is full (EAGAIN).

    A multipart message is atomic in ZeroMQ: once the first frame is accepted the rest
    are too, so only the first send can fail with EAGAIN.
    """
    fast = native()
    if fast is not None:
        try:
            sent: bool = fast.send_frames(sock.underlying, frames)
        except OSError as exc:
            raise as_zmq_error(exc) from exc
        return sent
    last = len(frames) - 1
    try:
        sock.send(frames[0], _NOBLOCK | _SNDMORE if last else _NOBLOCK, copy=False)
    except zmq.Again:
        return False
    for index in range(1, last):
        sock.send(frames[index], _SNDMORE, copy=False)
    if last:
        sock.send(frames[last], 0, copy=False)
    return True
