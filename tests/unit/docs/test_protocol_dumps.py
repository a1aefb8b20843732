"""The byte dumps of docs/protocol.md, section 9, held to the real encoders and decoders.

Every ``<!-- dump: NAME encoder=... -->`` block (:mod:`tests.unit.docs.protocol_dumps`)
is checked three ways: its bytes decode, as plain MessagePack, to exactly the value the
doc states beside them (every key present, none added); the real decoders
(``router_core.wire``, ``router_core.control.protocol``) read them as that value; and the
encoder the marker names, given that value, writes exactly those bytes:

``frame_message``, ``frame_batch``
    the framing functions every Python process uses (``sent_ns`` fixed at the header's);
``engine_link``
    a real :class:`~router_core.EngineLink` on ``inproc://`` sockets, whose
    ``acknowledge``, ``publish_load`` and ``send_batch`` write the message;
``router``
    the tokenizer router's forwarding of a ``LOAD`` to the workers: the header of the
    dump named by ``from=``, its payload without the key, re-encoded;
``control``
    ``router_core.control.protocol.encode`` (``kind=request`` or ``kind=reply``).

The bytes the paragraph after a dump quotes (``Bytes: `97` ...``) must be in the dump,
and the ``TOKEN_BATCH`` dump is what ``examples/echo_engine.py`` sends first, as the doc
says.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from router_core import EngineEndpoints, EngineLink, Request
from router_core.control.protocol import (
    ControlReply,
    ControlRequest,
    decode_reply,
    decode_request,
    encode,
)
from router_core.wire import Kind, combine_rows, decode_message, frame_batch, frame_message
from router_core.wire.codec import PAYLOAD_TYPES, encode_payload
from router_core.wire.control import Acknowledgement, LoadSnapshot
from router_core.wire.header import Header
from router_core.wire.kinds import BATCH_KINDS
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import GenerateRequest
from tests.unit.docs.protocol_dumps import Dump, Section, dumps

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
DUMPS = dumps(PROTOCOL.read_text(encoding="utf-8"))
BY_NAME = {dump.name: dump for dump in DUMPS}

#: What section 9 must show: what an engine writes, and every command it receives.
REQUIRED = (
    "TOKEN_BATCH",
    "engine ACK",
    "LOAD",
    "LOAD at a worker",
    "GENERATE",
    "EMBED",
    "ABORT",
    "ABORT abort_all",
    "PAUSE retract",
    "PAUSE abort",
    "CONTINUE",
    "FREEZE_GC",
    "IDLE",
)
ENCODERS = frozenset({"frame_message", "frame_batch", "engine_link", "router", "control"})


def _ids(dump: Dump) -> str:
    return dump.name


def _sections(dump: Dump) -> list[Section]:
    """The dump's frames; with ``rows=NAME``, a header whose rows are those of dump NAME
    (the doc shows them once)."""
    rows = dump.attributes.get("rows")
    return dump.sections + (BY_NAME[rows].sections[1:] if rows else [])


def _frames(dump: Dump) -> list[bytes]:
    return [section.data for section in _sections(dump)]


def _message(dump: Dump) -> tuple[Header, list[msgspec.Struct]]:
    """The dump's frames through the wire's own decoder (header, frame count, rows)."""
    return decode_message(_frames(dump))


def _stated(dump: Dump) -> tuple[Header, list[msgspec.Struct]]:
    """The values the doc states, as the wire's types."""
    sections = _sections(dump)
    header = msgspec.convert(sections[0].value, Header)
    if header.kind is Kind.IDLE:
        return header, []
    payload_type = PAYLOAD_TYPES[header.kind]
    payloads = [msgspec.convert(s.value, payload_type) for s in sections[1:]]
    return header, payloads


@pytest.fixture
def sent_ns(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``time.time_ns`` fixed at a value the test sets (the encoders stamp ``sent_ns``)."""
    clock = {"now": 0}
    monkeypatch.setattr(time, "time_ns", lambda: clock["now"])
    yield clock


def test_section_9_shows_what_an_engine_sends_and_receives() -> None:
    """A dump of each message an engine writes and of each command it receives."""
    assert not [name for name in REQUIRED if name not in BY_NAME]
    assert len(BY_NAME) == len(DUMPS), "two dumps share a name"


@pytest.mark.parametrize("dump", DUMPS, ids=_ids)
def test_a_dump_is_well_formed(dump: Dump) -> None:
    """It names a known encoder, and each frame's stated size and number are its own."""
    assert dump.attributes.get("encoder") in ENCODERS, dump.where
    numbered = [s.index for s in dump.sections if s.index is not None]
    assert numbered in ([], list(range(len(dump.sections)))), dump.where
    for section in dump.sections:
        assert section.size in (None, len(section.data)), dump.where


@pytest.mark.parametrize("dump", DUMPS, ids=_ids)
def test_the_bytes_are_the_stated_values(dump: Dump) -> None:
    """Decoded as plain MessagePack, each frame is exactly the value the doc states."""
    for section in dump.sections:
        assert msgspec.msgpack.decode(section.data) == section.value, dump.where


@pytest.mark.parametrize("dump", DUMPS, ids=_ids)
def test_the_real_decoders_read_the_stated_values(dump: Dump) -> None:
    """``decode_message`` (or the control protocol's decoder) reads the stated values."""
    if dump.attributes["encoder"] == "control":
        (section,) = dump.sections
        if dump.attributes["kind"] == "request":
            assert decode_request(section.data) == msgspec.convert(section.value, ControlRequest)
        else:
            assert decode_reply(section.data) == msgspec.convert(section.value, ControlReply)
        return
    assert _message(dump) == _stated(dump), dump.where


@pytest.mark.parametrize(
    "dump",
    [d for d in DUMPS if d.attributes["encoder"] in ("frame_message", "frame_batch", "router")],
    ids=_ids,
)
def test_the_python_encoder_writes_these_bytes(dump: Dump, sent_ns: Any) -> None:
    """The stated values, framed again by the encoder the marker names: the same bytes."""
    header, payloads = _stated(dump)
    sent_ns["now"] = header.sent_ns
    encoder = dump.attributes["encoder"]
    if encoder == "router":
        # What the tokenizer router forwards of the engine's LOAD: its header, and its
        # payload with the key taken out (router_core/tokenizer_router/engine_events.py).
        source = BY_NAME[dump.attributes["from"]]
        (snapshot,) = _message(source)[1]
        assert isinstance(snapshot, LoadSnapshot) and snapshot.secret
        again = [
            source.sections[0].data,
            encode_payload(msgspec.structs.replace(snapshot, secret="")),
        ]
    elif header.kind in BATCH_KINDS:
        assert encoder == "frame_batch", dump.where
        batch = combine_rows(PAYLOAD_TYPES[header.kind], payloads)
        again = frame_batch(
            batch,  # type: ignore[arg-type]
            traceparent=header.traceparent,
            tracestate=header.tracestate,
            row_traces=header.row_traces,
        )
    else:
        again = frame_message(
            header.kind,
            payloads[0] if payloads else None,
            rids=header.rids,
            reply_to=header.reply_to,
            traceparent=header.traceparent,
            tracestate=header.tracestate,
        )
    assert again == _frames(dump), dump.where


@pytest.mark.parametrize(
    "dump", [d for d in DUMPS if d.attributes["encoder"] == "engine_link"], ids=_ids
)
def test_the_engine_link_writes_these_bytes(
    dump: Dump, sent_ns: Any, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """A real engine link, given the stated values, sends exactly these frames."""
    header, payloads = _stated(dump)
    sent_ns["now"] = header.sent_ns
    name = dump.name.replace(" ", "-")
    endpoints = EngineEndpoints(
        inbound=f"inproc://{name}-engine",
        events=f"inproc://{name}-events",
        outputs=f"inproc://{name}-outputs",
    )
    events, outputs = context.socket(zmq.PULL), context.socket(zmq.PULL)
    try:
        events.bind(endpoints.events)
        outputs.bind(endpoints.outputs)
        payload = payloads[0] if payloads else None
        key = getattr(payload, "secret", "") or None
        with EngineLink(endpoints, context=context, key=key) as link:
            if payload is None:
                assert header.kind is Kind.IDLE
                assert link.send_idle()
                sock = outputs
            elif isinstance(payload, Acknowledgement):
                assert payload.participant == "engine"
                assert link.acknowledge(payload.op_id)
                sock = events
            elif isinstance(payload, LoadSnapshot):
                # The key comes from the link; the stamps are the stated ones.
                assert link.publish_load(msgspec.structs.replace(payload, secret=""))
                sock = events
            else:
                assert isinstance(payload, BatchTokenIDOutput | BatchEmbeddingOutput)
                assert link.send_batch(combine_rows(type(payload), payloads))
                sock = outputs
            link.poll(0)  # flushes anything the socket had not taken yet
            assert sock.poll(5000, zmq.POLLIN), f"{dump.where}: nothing was sent"
            assert sock.recv_multipart() == _frames(dump), dump.where
    finally:
        events.close(linger=0)
        outputs.close(linger=0)


@pytest.mark.parametrize("dump", [d for d in DUMPS if d.quoted], ids=_ids)
def test_the_bytes_an_annotation_quotes_are_in_the_dump(dump: Dump) -> None:
    """Every byte sequence the paragraph after a dump quotes is in that dump."""
    data = b"".join(_frames(dump))
    assert not [q.hex(" ") for q in dump.quoted if q not in data], dump.where


def test_the_control_dumps_are_what_encode_writes() -> None:
    """The control request and reply, encoded again: the same bytes."""
    control = [d for d in DUMPS if d.attributes["encoder"] == "control"]
    assert control
    for dump in control:
        (section,) = dump.sections
        kind = ControlRequest if dump.attributes["kind"] == "request" else ControlReply
        assert encode(msgspec.convert(section.value, kind)) == section.data, dump.where


def test_every_hex_dump_of_section_9_is_marked() -> None:
    """No block of hex lines in section 9 escapes the checks."""
    text = PROTOCOL.read_text(encoding="utf-8")
    section = text[text.index("\n## 9. ") : text.index("\n## 10. ")]
    blocks = section.split("```")[1::2]
    hex_blocks = [b for b in blocks if any(line[:6].strip() == "0000" for line in b.splitlines())]
    assert len(hex_blocks) == len(DUMPS)
    assert "(one frame, 16 bytes): `" not in section, "an inline dump is not checked"
    assert Kind.IDLE.value == BY_NAME["IDLE"].sections[0].value[0]


def test_the_token_batch_is_the_echo_engines_first_row(
    sent_ns: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Section 9.2's TOKEN_BATCH is what examples/echo_engine.py sends first for its
    prompt (the doc says so)."""
    path = PROTOCOL.parents[1] / "examples" / "echo_engine.py"
    spec = importlib.util.spec_from_file_location("echo_engine_for_dumps", path)
    assert spec is not None and spec.loader is not None
    echo = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, echo)  # its dataclasses look it up
    spec.loader.exec_module(echo)
    dump = BY_NAME["TOKEN_BATCH"]
    header, (row,) = _stated(dump)
    assert isinstance(row, BatchTokenIDOutput)
    sent: list[BatchTokenIDOutput] = []

    class Link:
        def send_batch(self, batch: BatchTokenIDOutput) -> bool:
            sent.append(batch)
            return True

    engine = echo.EchoEngine(Link(), 4)
    prompt = [461, 1278, 307, 1255, 279, 265, 381]
    request = GenerateRequest(rid="r1", input_ids=prompt)
    engine.handle(
        Request(kind=Kind.GENERATE, payload=request, rid="r1", reply_to=header.reply_to[0])
    )
    engine.step()
    sent_ns["now"] = header.sent_ns
    assert frame_batch(sent[0]) == _frames(dump)
