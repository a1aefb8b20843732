"""The server side of a control socket: decode, check the key, dispatch through a
table, reply.

Nothing a client sends can raise out of :meth:`ControlServer.handle_ready`: bad frames,
requests without the stack key, unknown commands and bad arguments get a structured
error reply and are counted; a bug in a handler is logged and answered with
``INTERNAL``. The :class:`~router_core.control.guard.ControlGuard` decides which
requests run and where the audit lines go: one for each refused request that decoded
(``UNAUTHORIZED``, ``UNKNOWN_COMMAND``, ``BAD_ARGUMENTS``) and one for each run of a
mutating command, with its result (a barrier answered later: ``started`` when it begins
and its outcome when it is answered).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar

import msgspec
import zmq

from router_core.control.guard import ControlGuard, call_of, outcome_of
from router_core.control.protocol import (
    ControlError,
    ControlReply,
    ControlRequest,
    ErrorCode,
    decode_request,
    encode,
    error,
    ok,
)
from router_core.control.table import DEFERRED, AuditedCall, Command, ReplyTo
from router_core.counters import Counters

__all__ = ["DEFERRED", "Command", "ControlGuard", "ControlServer", "ReplyTo"]

logger = logging.getLogger(__name__)

StateT = TypeVar("StateT")

#: How many control requests to serve per readiness event, so control traffic can
#: never starve the data path.
_BUDGET: Final = 64


class ControlServer(Generic[StateT]):
    """Serves one bound ROUTER socket for ``state`` with a table of commands; ``guard``
    (default: no key, no audit) says which requests run and where audit lines go."""

    def __init__(
        self,
        sock: zmq.Socket[bytes],
        state: StateT,
        commands: Mapping[str, Command[StateT]],
        counters: Counters,
        guard: ControlGuard | None = None,
    ) -> None:
        self.socket = sock
        self._state = state
        self._commands = commands
        self._counters = counters
        self._guard = guard or ControlGuard()

    def handle_ready(self) -> None:
        """Serve the requests waiting on the socket, up to a budget."""
        for _ in range(_BUDGET):
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._serve(frames)

    def answer(self, reply_to: ReplyTo, result: Any) -> None:
        """Send the successful answer to a deferred request (audited if it is a mutation)."""
        if reply_to.audited is not None:
            outcome, detail = outcome_of(result)
            self._guard.record(reply_to.audited, outcome, detail=detail)
        self._send(reply_to.envelope, ok(reply_to.request_id, result))

    def fail(self, reply_to: ReplyTo, code: ErrorCode, message: str) -> None:
        """Send the error answer to a deferred request (audited if it is a mutation)."""
        self._record_failure(reply_to.audited, code, message)
        self._send(reply_to.envelope, error(reply_to.request_id, code, message))

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
        if not self._guard.admits(request):
            # Before anything else about it is believed (its deadline included).
            self._counters.add("rejected", "control_unauthorized")
            message = self._guard.refusal()
            self._send(envelope, self._refused(request, ErrorCode.UNAUTHORIZED, message))
            return
        if request.deadline_ns and time.time_ns() > request.deadline_ns:
            self._counters.add("rejected", "control_expired")
            return
        reply = self._dispatch(request, envelope)
        if reply is not None:
            self._send(envelope, reply)

    def _refused(self, request: ControlRequest, code: ErrorCode, message: str) -> ControlReply:
        """The error reply to a request refused as it stands, audited."""
        self._guard.record(
            call_of(request, request.args), "refused", reason=code.name.lower(), detail=message
        )
        return error(request.id, code, message)

    def _dispatch(
        self, request: ControlRequest, envelope: tuple[bytes, ...]
    ) -> ControlReply | None:
        name, request_id = request.command, request.id
        command = self._commands.get(name)
        if command is None:
            self._counters.add("rejected", "unknown_command")
            known = ", ".join(sorted(self._commands))
            message = f"{name!r}; known: {known}"
            return self._refused(request, ErrorCode.UNKNOWN_COMMAND, message)
        self._counters.add("control_commands", name)
        try:
            parsed = msgspec.convert(request.args, command.args_type)
        except msgspec.ValidationError as exc:
            self._counters.add("rejected", "control_arguments")
            return self._refused(request, ErrorCode.BAD_ARGUMENTS, f"{name}: {exc}")
        audited = call_of(request, parsed) if command.mutates else None
        try:
            result = command.handler(self._state, parsed, ReplyTo(envelope, request_id, audited))
        except ControlError as exc:
            self._record_failure(audited, exc.code, exc.message)
            return error(request_id, exc.code, exc.message)
        except Exception:
            logger.exception("control command %s failed", name)
            self._counters.add("control_errors", name)
            message = f"{name} failed; see the router's log"
            self._record_failure(audited, ErrorCode.INTERNAL, message)
            return error(request_id, ErrorCode.INTERNAL, message)
        if audited is not None:
            outcome, detail = ("started", "") if result is DEFERRED else outcome_of(result)
            self._guard.record(audited, outcome, detail=detail)
        if result is DEFERRED:
            return None
        return ok(request_id, result)

    def _record_failure(self, audited: AuditedCall | None, code: ErrorCode, message: str) -> None:
        if audited is not None:
            self._guard.record(audited, "error", reason=code.name.lower(), detail=message)

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
