"""What every loop does with inbound sockets: receive, validate the header and frame count.

A message is validated once here (header decodes, fits its kind, frame count matches)
and only then handed to a router's handler; every failure is counted under ``rejected``
with a reason, and the loop goes on. The worker link validates its inbound messages with
:func:`accept` too, under its own frame-count rule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Final

import zmq

from router_core.counters import Counters
from router_core.transport import (
    MAX_FRAMES,
    FrameLike,
    MalformedMessage,
    bind,
    close_bound,
    recv_message,
)
from router_core.wire import Header, WireError, decode_header, payload_frame_count

__all__ = ["BUDGET", "BoundSockets", "FrameCount", "Handler", "accept", "drain", "read_waiting"]

logger = logging.getLogger(__name__)

#: Messages handled per socket per loop iteration, so one busy socket cannot starve the
#: others (or the timers).
BUDGET: Final = 512

#: A router's handler for one validated message.
Handler = Callable[[Header, list[FrameLike]], None]

#: How many payload frames must follow a header (the wire's rule is
#: :func:`~router_core.wire.payload_frame_count`).
FrameCount = Callable[[Header], int]


def accept(
    frames: list[FrameLike],
    handle: Handler,
    counters: Counters,
    frame_count: FrameCount = payload_frame_count,
) -> None:
    """Validate the header and the frame count of one message, then hand it on.

    Rejected (counted, not handed on): a header that does not decode or fit its kind
    (the codec's reason), and a message whose payload frames are not ``frame_count(header)``
    (``too_many_frames`` past ``MAX_FRAMES``, else ``frame_count``).
    """
    try:
        header = decode_header(frames[0])  # type: ignore[arg-type]
    except WireError as exc:
        counters.add("rejected", exc.reason)
        return
    if len(frames) - 1 != frame_count(header):
        counters.add("rejected", "too_many_frames" if len(frames) > MAX_FRAMES else "frame_count")
        return
    handle(header, frames)


def drain(
    sock: zmq.Socket[bytes], handle: Handler, counters: Counters, budget: int = BUDGET
) -> int:
    """Receive and :func:`accept` up to ``budget`` messages; return how many were taken.

    Fewer than ``budget`` means the socket ran dry.
    """
    for taken in range(budget):
        try:
            frames = recv_message(sock)
        except zmq.Again:
            return taken
        except MalformedMessage as exc:
            counters.add("rejected", exc.reason)
            continue
        accept(frames, handle, counters)
    return budget


class BoundSockets(AbstractContextManager["BoundSockets"]):
    """The sockets a router binds; all closed (and ipc files removed) on exit."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], *, hwm: int, allow_remote: bool
    ) -> None:
        self._context = context
        self._hwm = hwm
        self._allow_remote = allow_remote
        self._opened: list[tuple[zmq.Socket[bytes], str]] = []

    def bind(
        self,
        socket_type: int,
        endpoint: str,
        prepare: Callable[[zmq.Socket[bytes]], None] | None = None,
    ) -> zmq.Socket[bytes]:
        """Bind a socket of ``socket_type`` at ``endpoint`` (loopback-only unless allowed),
        ``prepare`` run on it first (:func:`router_core.transport.bind`)."""
        sock = bind(
            self._context,
            socket_type,
            endpoint,
            hwm=self._hwm,
            allow_remote=self._allow_remote,
            prepare=prepare,
        )
        self._opened.append((sock, endpoint))
        return sock

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sock, endpoint in self._opened:
            close_bound(sock, endpoint)
        self._opened.clear()


def read_waiting(
    sock: zmq.Socket[bytes],
    apply: Callable[[list[FrameLike]], None],
    counters: Counters,
    max_frames: int = MAX_FRAMES,
) -> bool:
    """Receive and ``apply`` up to ``BUDGET`` messages from ``sock``, the reader of an
    edge-triggered ZMQ_FD; True once it ran dry, False when the budget ran out first (the
    caller reschedules). A message with too many frames is counted under ``rejected``, and
    so is one ``apply`` fails on (``handler_error``): reading goes on either way."""
    for _ in range(BUDGET):
        try:
            frames = recv_message(sock, max_frames)
        except zmq.Again:
            # Reading ZMQ_EVENTS re-arms the edge-triggered FD; a message that slipped
            # in meanwhile would otherwise wait for the next one.
            if not int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
                return True
            continue
        except MalformedMessage as exc:
            counters.add("rejected", exc.reason)
            continue
        try:
            apply(frames)
        except Exception:  # never leave later messages unread behind one bad one
            logger.exception("a message could not be applied")
            counters.add("rejected", "handler_error")
    return False
