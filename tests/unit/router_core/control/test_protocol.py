"""Tests for the control protocol: the reply helpers ok() and error(), the stable error
codes and the frame codec."""

from __future__ import annotations

import msgspec
import pytest

from router_core.control import (
    ControlError,
    ControlReply,
    ControlRequest,
    ControlTimeout,
    ErrorCode,
)
from router_core.control.protocol import ErrorBody, decode_reply, decode_request, encode, error, ok
from tests.unit.router_core.control.command_table import request


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
            "UNAUTHORIZED": 8,
            "ENGINE_FAILED": 9,
            "ENGINE_TIMEOUT": 10,
        }

    def test_key_and_actor_round_trip_and_the_key_is_never_shown(self) -> None:
        """A request's key and actor survive the wire, an old request without them
        decodes with both empty, and its repr never shows the key."""
        sent = ControlRequest(id=1, command="status", key="k" * 64, actor="ctl")
        assert decode_request(encode(sent)) == sent
        assert decode_request(encode(ControlRequest(id=2, command="status"))).key == ""
        assert "k" * 64 not in repr(sent)
        assert "actor='ctl'" in repr(sent)

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
