"""Control socket messages: one request frame in, one reply frame out.

A client (DEALER or REQ) sends ``ControlRequest``; the server (ROUTER) answers with a
``ControlReply`` carrying the same ``id``. Every reply is built by :func:`ok` or
:func:`error`, and every error has a numbered :class:`ErrorCode`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import msgspec

__all__ = [
    "ControlError",
    "ControlReply",
    "ControlRequest",
    "ControlTimeout",
    "ErrorBody",
    "ErrorCode",
    "decode_reply",
    "decode_request",
    "encode",
    "error",
    "ok",
]


class ErrorCode(IntEnum):
    """Why a command failed; stable numbers, documented in ``docs/protocol.md``."""

    BAD_REQUEST = 1  # the frame is not a ControlRequest
    UNKNOWN_COMMAND = 2
    BAD_ARGUMENTS = 3
    NOT_FOUND = 4  # e.g. no such worker
    CONFLICT = 5  # the command does not apply in the current state
    INTERNAL = 6  # a bug in the server; logged there
    TIMEOUT = 7  # client side: no reply in time
    UNAUTHORIZED = 8  # the request does not carry the stack key; nothing was run
    ENGINE_FAILED = 9  # the engine tried the command and failed, or does not know it
    ENGINE_TIMEOUT = 10  # the engine did not answer the command in time


class ControlRequest(msgspec.Struct, omit_defaults=True):
    """``command`` with keyword ``args``; ``id`` is echoed in the reply.

    ``deadline_ns`` (wall clock, ``time.time_ns()``; 0 for none) is when the caller stops
    waiting: a server that reads the request later drops it unanswered rather than run a
    command (a pause, say) nobody is waiting for any more. ``key`` is the stack key
    (``stack.key`` in the run directory): a server that has one runs nothing, not even
    ``status``, for a request without it (``UNAUTHORIZED``). ``actor`` says who asks
    (``admin:<operator>``, ``ctl``, ``supervisor``); it is the caller's own claim,
    written in the server's audit lines, and proves nothing.
    """

    id: int
    command: str
    args: dict[str, Any] = {}
    deadline_ns: int = 0
    key: str = ""
    actor: str = ""

    def __repr__(self) -> str:
        # Never the key: a request may end up in a log line or a test's failure report.
        shown = "<key>" if self.key else ""
        return (
            f"ControlRequest(id={self.id!r}, command={self.command!r}, args={self.args!r}, "
            f"deadline_ns={self.deadline_ns!r}, key={shown!r}, actor={self.actor!r})"
        )


class ErrorBody(msgspec.Struct):
    """What went wrong, by number, name and a sentence for humans."""

    code: int
    name: str
    message: str


class ControlReply(msgspec.Struct, omit_defaults=True):
    """``result`` when ``ok``; otherwise ``error``."""

    id: int
    ok: bool
    result: Any = None
    error: ErrorBody | None = None


class ControlError(Exception):
    """A command failed: raised by handlers on the server, and by clients on a reply."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class ControlTimeout(ControlError):
    """No reply arrived within the client's timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.TIMEOUT, message)


_ENCODER = msgspec.msgpack.Encoder()
_REQUEST_DECODER = msgspec.msgpack.Decoder(ControlRequest)
_REPLY_DECODER = msgspec.msgpack.Decoder(ControlReply)


def ok(request_id: int, result: Any = None) -> ControlReply:
    """A successful reply."""
    return ControlReply(id=request_id, ok=True, result=result)


def error(request_id: int, code: ErrorCode, message: str) -> ControlReply:
    """A failed reply."""
    return ControlReply(
        id=request_id, ok=False, error=ErrorBody(code=int(code), name=code.name, message=message)
    )


def encode(message: ControlRequest | ControlReply) -> bytes:
    """Encode a request or reply frame."""
    return _ENCODER.encode(message)


def decode_request(frame: bytes) -> ControlRequest:
    """Decode a request frame; raises ``msgspec.DecodeError`` for any frame that does
    not decode, one nested too deeply included (``args`` may hold anything)."""
    try:
        return _REQUEST_DECODER.decode(frame)
    except RecursionError:
        raise msgspec.DecodeError("the request is nested too deeply") from None


def decode_reply(frame: bytes) -> ControlReply:
    """Decode a reply frame; raises ``msgspec.DecodeError`` (see :func:`decode_request`)."""
    try:
        return _REPLY_DECODER.decode(frame)
    except RecursionError:
        raise msgspec.DecodeError("the reply is nested too deeply") from None
