"""The server side of a control socket: decode, dispatch through a table, reply.

Nothing a client sends can raise out of :meth:`ControlServer.handle_ready`: bad frames,
unknown commands and bad arguments get a structured error reply and are counted; a bug
in a handler is logged and answered with ``INTERNAL``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar

import msgspec
import zmq

from router_core.control.commands import DEFERRED, Command, ReplyTo
from router_core.control.protocol import (
    ControlError,
    ControlReply,
    ErrorCode,
    decode_request,
    encode,
    error,
    ok,
)
from router_core.counters import Counters

__all__ = ["DEFERRED", "Command", "ControlServer", "ReplyTo"]

logger = logging.getLogger(__name__)

StateT = TypeVar("StateT")

#: How many control requests to serve per readiness event, so control traffic can
#: never starve the data path.
_BUDGET: Final = 64


class ControlServer(Generic[StateT]):
    """Serves one bound ROUTER socket for ``state`` with a table of commands."""

    def __init__(
        self,
        sock: zmq.Socket[bytes],
        state: StateT,
        commands: Mapping[str, Command[StateT]],
        counters: Counters,
    ) -> None:
        self.socket = sock
        self._state = state
        self._commands = commands
        self._counters = counters

    def handle_ready(self) -> None:
        """Serve the requests waiting on the socket, up to a budget."""
        for _ in range(_BUDGET):
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._serve(frames)

    def answer(self, reply_to: ReplyTo, result: Any) -> None:
        """Send the successful answer to a deferred request."""
        self._send(reply_to.envelope, ok(reply_to.request_id, result))

    def _serve(self, frames: list[bytes]) -> None:
        # A DEALER sends [identity, request]; a REQ sends [identity, b"", request].
        if len(frames) < 2 or (len(frames) == 3 and frames[1] != b"") or len(frames) > 3:
            self._counters.add("rejected", "control_envelope")
            if len(frames) >= 2:
                self._send(tuple(frames[:-1]), error(0, ErrorCode.BAD_REQUEST, "bad envelope"))
            return
        envelope = tuple(frames[:-1])
        try:
            request = decode_request(frames[-1])
        except msgspec.DecodeError as exc:
            self._counters.add("rejected", "control_request")
            self._send(envelope, error(0, ErrorCode.BAD_REQUEST, str(exc)))
            return
        if request.deadline_ns and time.time_ns() > request.deadline_ns:
            self._counters.add("rejected", "control_expired")
            return
        reply = self._dispatch(request.id, request.command, request.args, envelope)
        if reply is not None:
            self._send(envelope, reply)

    def _dispatch(
        self, request_id: int, name: str, args: dict[str, Any], envelope: tuple[bytes, ...]
    ) -> ControlReply | None:
        command = self._commands.get(name)
        if command is None:
            self._counters.add("rejected", "unknown_command")
            known = ", ".join(sorted(self._commands))
            return error(request_id, ErrorCode.UNKNOWN_COMMAND, f"{name!r}; known: {known}")
        self._counters.add("control_commands", name)
        try:
            parsed = msgspec.convert(args, command.args_type)
        except msgspec.ValidationError as exc:
            self._counters.add("rejected", "control_arguments")
            return error(request_id, ErrorCode.BAD_ARGUMENTS, f"{name}: {exc}")
        try:
            result = command.handler(self._state, parsed, ReplyTo(envelope, request_id))
        except ControlError as exc:
            return error(request_id, exc.code, exc.message)
        except Exception:
            logger.exception("control command %s failed", name)
            self._counters.add("control_errors", name)
            return error(request_id, ErrorCode.INTERNAL, f"{name} failed; see the router's log")
        if result is DEFERRED:
            return None
        return ok(request_id, result)

    def _send(self, envelope: tuple[bytes, ...], reply: ControlReply) -> None:
        try:
            body = encode(reply)
        except Exception:  # any encoder failure (TypeError, OverflowError, RecursionError...)
            # A handler returned something that is not plain data: a server bug.
            logger.exception("control reply %d cannot be encoded", reply.id)
            self._counters.add("control_errors", "unencodable_reply")
            body = encode(error(reply.id, ErrorCode.INTERNAL, "the reply could not be encoded"))
        try:
            self.socket.send_multipart([*envelope, body], zmq.NOBLOCK)
        except zmq.Again:
            self._counters.add("dropped", "control_reply")
