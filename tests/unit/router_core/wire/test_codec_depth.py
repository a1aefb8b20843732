"""A value nested deeper than the decoders go is a counted reject, never an exception
that stops a loop: ``RecursionError`` becomes ``WireError("too_deep")`` for headers and
payloads, and ``msgspec.DecodeError`` for control frames."""

from __future__ import annotations

import msgspec
import pytest

from router_core.control.protocol import decode_reply, decode_request
from router_core.wire import Header, Kind, WireError, decode_header, encode_header
from router_core.wire.codec import decode_payload

#: One-element arrays around a nil, far deeper than Python's recursion limit.
DEEP = b"\x91" * 200_000 + b"\xc0"


def test_a_deep_extra_header_element_is_too_deep() -> None:
    header = encode_header(Header(Kind.GENERATE, ["a"], ["ipc:///w"], 1))
    with pytest.raises(WireError) as caught:
        decode_header(bytes([header[0] + 1]) + header[1:] + DEEP)
    assert caught.value.reason == "too_deep"


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (Kind.HEARTBEAT, {"worker_id": "w0"}),
        (Kind.LOAD, {"step": 1}),
        (Kind.GENERATE, {"rid": "g", "input_ids": [1]}),
        (Kind.STR_BATCH, {"rids": ["a"]}),
    ],
)
def test_a_deep_unknown_payload_field_is_too_deep(kind: Kind, payload: dict[str, object]) -> None:
    body = msgspec.msgpack.encode(payload)
    deep = bytes([body[0] + 1]) + body[1:] + b"\xa4deep" + DEEP
    with pytest.raises(WireError) as caught:
        decode_payload(kind, deep)
    assert caught.value.reason == "too_deep"


def test_deep_control_args_and_replies_are_decode_errors() -> None:
    request = msgspec.msgpack.encode({"id": 1, "command": "status", "args": {}})
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        decode_request(request.replace(b"\xa4args\x80", b"\xa4args\x81\xa1x" + DEEP))
    reply = msgspec.msgpack.encode({"id": 1, "ok": True, "result": None})
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        decode_reply(reply.replace(b"\xa6result\xc0", b"\xa6result" + DEEP))
