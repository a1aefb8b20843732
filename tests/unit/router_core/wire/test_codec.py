"""Tests for the header, the frame-count rules and payload decoding of the wire codec."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from router_core.wire import (
    BATCH_KINDS,
    PAYLOAD_TYPES,
    Header,
    Kind,
    WireError,
    check_header,
    decode_header,
    decode_message,
    decode_payload,
    encode_header,
    encode_payload,
    frame_batch,
    frame_message,
    payload_frame_count,
)
from router_core.wire.outputs import BatchTokenIDOutput

SETTINGS = settings(max_examples=150, deadline=None)

ALL_KINDS = [pytest.param(kind, id=kind.name) for kind in Kind]
PAYLOAD_KINDS = [pytest.param(kind, id=kind.name) for kind in PAYLOAD_TYPES]

#: Kinds whose header must name exactly one request and its owner.
SINGLE_REQUEST_KINDS = frozenset({Kind.GENERATE, Kind.EMBED})

WORKER = "ipc:///tmp/switchboard-test/worker-0"

UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
TEXT = st.text(max_size=16)


@st.composite
def valid_headers(draw: st.DrawFn, kind: Kind) -> Header:
    """A header of ``kind`` that satisfies its shape rules."""
    if kind is Kind.ABORT:
        rids = draw(st.lists(TEXT, max_size=1))
        reply_to = draw(st.lists(TEXT, min_size=1, max_size=1))
    else:
        if kind in SINGLE_REQUEST_KINDS:
            count = 1
        elif kind in BATCH_KINDS:
            count = draw(st.integers(1, 8))
        elif kind is Kind.IDLE:
            count = 0
        else:
            count = draw(st.integers(0, 3))
        rids = draw(st.lists(TEXT, min_size=count, max_size=count))
        reply_to = draw(st.lists(TEXT, min_size=count, max_size=count))
    return Header(kind, rids, reply_to, draw(UINT64), draw(TEXT), draw(TEXT))


#: Any header, valid or not for its kind.
ANY_HEADER = st.builds(
    Header,
    st.sampled_from(Kind),
    st.lists(TEXT, max_size=3),
    st.lists(TEXT, max_size=3),
    UINT64,
    TEXT,
    TEXT,
)


def minimal_value(field_type: mi.Type) -> Any:
    """The simplest valid value of ``field_type`` (for a required field)."""
    if isinstance(field_type, mi.StructType):
        return minimal_instance(field_type.cls)
    if isinstance(field_type, mi.UnionType):
        return minimal_value(field_type.types[0])
    if isinstance(field_type, mi.LiteralType):
        return field_type.values[0]
    if isinstance(field_type, mi.ListType):
        return []
    if isinstance(field_type, mi.DictType):
        return {}
    simplest = {mi.BoolType: False, mi.IntType: 0, mi.FloatType: 0.0, mi.StrType: "x"}
    if type(field_type) not in simplest:
        raise NotImplementedError(f"no minimal value for {field_type!r}")
    return simplest[type(field_type)]


def minimal_instance(struct_type: type[msgspec.Struct]) -> msgspec.Struct:
    """An instance of ``struct_type`` with only its required fields set, read from msgspec."""
    info = mi.type_info(struct_type)
    assert isinstance(info, mi.StructType)
    required = {field.name: minimal_value(field.type) for field in info.fields if field.required}
    return struct_type(**required)


def valid_message(kind: Kind) -> list[bytes]:
    """A well-formed message of ``kind``, framed by the codec itself."""
    if kind in BATCH_KINDS:
        batch_type = PAYLOAD_TYPES[kind]
        batch = batch_type(rids=["r0", "r1"], http_worker_ipcs=[WORKER, WORKER])
        return frame_batch(batch)  # type: ignore[arg-type]
    if kind is Kind.IDLE:
        return frame_message(kind, None)
    rids = ["r0"] if kind in SINGLE_REQUEST_KINDS else []
    reply_to = [WORKER] if kind in SINGLE_REQUEST_KINDS or kind is Kind.ABORT else []
    payload = minimal_instance(PAYLOAD_TYPES[kind])
    return frame_message(kind, payload, rids=rids, reply_to=reply_to)


class TestHeaderRoundtrip:
    """encode_header -> decode_header gives back the header, for every kind."""

    @pytest.mark.parametrize("kind", ALL_KINDS)
    @settings(max_examples=15, deadline=None)
    @given(data=st.data())
    def test_valid_header_roundtrips(self, kind: Kind, data: st.DataObject) -> None:
        """A header that fits its kind's shape decodes to an equal header."""
        header = data.draw(valid_headers(kind))
        decoded = decode_header(encode_header(header))
        assert decoded == header
        assert decoded.kind is kind

    @SETTINGS
    @given(header=ANY_HEADER)
    def test_decode_header_agrees_with_check_header(self, header: Header) -> None:
        """decode_header accepts a decodable header exactly when check_header does."""
        try:
            check_header(header)
        except WireError as exc:
            assert exc.reason == "header_shape"
            with pytest.raises(WireError) as info:
                decode_header(encode_header(header))
            assert info.value.reason == "header_shape"
        else:
            assert decode_header(encode_header(header)) == header

    def test_memoryview_frames_decode(self) -> None:
        """A header frame handed over as a memoryview (zmq copy=False) decodes."""
        header = Header(Kind.HEARTBEAT, sent_ns=7)
        assert decode_header(memoryview(encode_header(header))) == header


class TestHeaderLayout:
    """The first two bytes of a header frame, which docs/protocol.md promises.

    A header is an ``array_like`` struct of six fields and every kind code is below 128,
    so byte 0 is the fixarray marker 0x96 and byte 1 is the kind code itself: a router
    can learn a message's kind from ``frame[1]`` without decoding anything.
    """

    def test_every_kind_code_is_a_positive_fixint(self) -> None:
        """Every kind code is below 128, so it encodes as one MessagePack positive fixint."""
        assert all(0 <= kind.value < 0x80 for kind in Kind)

    @SETTINGS
    @given(header=ANY_HEADER)
    def test_byte_0_is_fixarray_and_byte_1_is_the_kind(self, header: Header) -> None:
        """Byte 0 is a fixarray marker (0x90 | field count); byte 1 is the kind code."""
        frame = encode_header(header)
        assert 0x90 <= frame[0] <= 0x9F
        assert frame[0] == 0x90 | len(msgspec.structs.fields(Header))
        assert frame[1] == header.kind.value
        assert Kind(frame[1]) is header.kind


class TestCheckHeader:
    """check_header: the shape rules of each kind."""

    @pytest.mark.parametrize(
        ("kind", "rids", "reply_to"),
        [
            (Kind.GENERATE, ["r"], ["w"]),
            (Kind.EMBED, ["r"], ["w"]),
            (Kind.ABORT, ["r"], ["w"]),
            (Kind.ABORT, [], ["w"]),
            (Kind.TOKEN_BATCH, ["r1", "r2"], ["w1", "w2"]),
            (Kind.STR_BATCH, ["r"], ["w"]),
            (Kind.EMBEDDING_BATCH, ["r"], ["w"]),
            (Kind.HEARTBEAT, [], []),
            (Kind.IDLE, [], []),
        ],
    )
    def test_accepts_well_shaped_headers(
        self, kind: Kind, rids: list[str], reply_to: list[str]
    ) -> None:
        """Headers that fit their kind pass the check."""
        check_header(Header(kind, rids, reply_to))

    @pytest.mark.parametrize(
        ("kind", "rids", "reply_to"),
        [
            pytest.param(Kind.GENERATE, [], [], id="generate-no-rid"),
            pytest.param(Kind.GENERATE, ["a", "b"], ["w", "w"], id="generate-two-rids"),
            pytest.param(Kind.EMBED, [], [], id="embed-no-rid"),
            pytest.param(Kind.EMBED, ["a", "b"], ["w", "w"], id="embed-two-rids"),
            pytest.param(Kind.GENERATE, ["a"], [], id="generate-no-owner"),
            pytest.param(Kind.TOKEN_BATCH, ["a", "b"], ["w"], id="batch-fewer-owners"),
            pytest.param(Kind.STR_BATCH, ["a"], ["w", "v"], id="batch-more-owners"),
            pytest.param(Kind.REGISTER, ["a"], [], id="control-rid-without-owner"),
            pytest.param(Kind.TOKEN_BATCH, [], [], id="token-batch-no-rows"),
            pytest.param(Kind.STR_BATCH, [], [], id="str-batch-no-rows"),
            pytest.param(Kind.EMBEDDING_BATCH, [], [], id="embedding-batch-no-rows"),
            pytest.param(Kind.ABORT, ["a"], [], id="abort-no-owner"),
            pytest.param(Kind.ABORT, [], [], id="abort-nothing"),
            pytest.param(Kind.ABORT, ["a", "b"], ["w"], id="abort-two-rids"),
            pytest.param(Kind.ABORT, ["a"], ["w", "v"], id="abort-two-owners"),
        ],
    )
    def test_refuses_misshapen_headers(
        self, kind: Kind, rids: list[str], reply_to: list[str]
    ) -> None:
        """Headers that break their kind's rules raise WireError('header_shape')."""
        with pytest.raises(WireError) as info:
            check_header(Header(kind, rids, reply_to))
        assert info.value.reason == "header_shape"


class TestDecodeHeaderRejects:
    """decode_header turns every undecodable frame into WireError('bad_header')."""

    @SETTINGS
    @given(frame=st.binary(max_size=64))
    def test_random_bytes(self, frame: bytes) -> None:
        """Bytes msgspec cannot decode as a Header raise bad_header; nothing else escapes."""
        try:
            expected = msgspec.msgpack.decode(frame, type=Header)
        except msgspec.DecodeError:
            with pytest.raises(WireError) as info:
                decode_header(frame)
            assert info.value.reason == "bad_header"
        else:
            try:
                assert decode_header(frame) == expected
            except WireError as exc:
                assert exc.reason == "header_shape"

    @SETTINGS
    @given(header=ANY_HEADER, data=st.data())
    def test_corrupted_headers(self, header: Header, data: st.DataObject) -> None:
        """A valid frame with one byte replaced is either a header or WireError, never else."""
        frame = bytearray(encode_header(header))
        position = data.draw(st.integers(0, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
        try:
            expected = msgspec.msgpack.decode(bytes(frame), type=Header)
        except msgspec.DecodeError:
            with pytest.raises(WireError) as info:
                decode_header(bytes(frame))
            assert info.value.reason == "bad_header"
        else:
            try:
                assert decode_header(bytes(frame)) == expected
            except WireError as exc:
                assert exc.reason == "header_shape"

    @pytest.mark.parametrize("kind", ALL_KINDS)
    @settings(max_examples=10, deadline=None)
    @given(data=st.data())
    def test_every_strict_prefix(self, kind: Kind, data: st.DataObject) -> None:
        """Every strict prefix of a valid header frame, b'' included, is bad_header."""
        frame = encode_header(data.draw(valid_headers(kind)))
        for end in range(len(frame)):
            with pytest.raises(WireError) as info:
                decode_header(frame[:end])
            assert info.value.reason == "bad_header", end

    def test_trailing_bytes(self) -> None:
        """A valid header followed by anything is bad_header."""
        with pytest.raises(WireError) as info:
            decode_header(encode_header(Header(Kind.IDLE)) + b"\xc0")
        assert info.value.reason == "bad_header"

    def test_unknown_kind_code(self) -> None:
        """A kind code outside Kind is bad_header."""
        assert 99 not in {kind.value for kind in Kind}
        frame = msgspec.msgpack.encode([99, [], [], 0, "", ""])
        with pytest.raises(WireError) as info:
            decode_header(frame)
        assert info.value.reason == "bad_header"


class TestDecodeMessage:
    """decode_message checks the frame count against payload_frame_count."""

    @pytest.mark.parametrize("kind", ALL_KINDS)
    def test_well_formed_message_decodes(self, kind: Kind) -> None:
        """A message with exactly payload_frame_count(header) payload frames decodes."""
        frames = valid_message(kind)
        header, payloads = decode_message(frames)
        assert header.kind is kind
        assert len(payloads) == payload_frame_count(header) == len(frames) - 1
        if kind in PAYLOAD_TYPES:
            assert all(type(payload) is PAYLOAD_TYPES[kind] for payload in payloads)

    @pytest.mark.parametrize("kind", ALL_KINDS)
    def test_one_frame_too_many(self, kind: Kind) -> None:
        """An extra payload frame is a frame_count error for every kind."""
        frames = valid_message(kind)
        with pytest.raises(WireError) as info:
            decode_message([*frames, frames[-1]])
        assert info.value.reason == "frame_count"

    @pytest.mark.parametrize("kind", [k for k in ALL_KINDS if k.values[0] is not Kind.IDLE])
    def test_one_frame_too_few(self, kind: Kind) -> None:
        """A missing payload frame is a frame_count error for every kind with payloads."""
        frames = valid_message(kind)
        with pytest.raises(WireError) as info:
            decode_message(frames[:-1])
        assert info.value.reason == "frame_count"

    def test_empty_message(self) -> None:
        """A message with no frames at all is a frame_count error."""
        with pytest.raises(WireError) as info:
            decode_message([])
        assert info.value.reason == "frame_count"

    @pytest.mark.parametrize(
        ("kind", "expected"),
        [
            pytest.param(Kind.GENERATE, 1, id="request"),
            pytest.param(Kind.HEARTBEAT, 1, id="control"),
            pytest.param(Kind.IDLE, 0, id="idle"),
            pytest.param(Kind.TOKEN_BATCH, 3, id="batch"),
        ],
    )
    def test_payload_frame_count(self, kind: Kind, expected: int) -> None:
        """Batches carry one frame per rid, IDLE none, every other kind one."""
        rids = ["a", "b", "c"] if kind in BATCH_KINDS else []
        assert payload_frame_count(Header(kind, rids, rids)) == expected

    @pytest.mark.parametrize("kind", PAYLOAD_KINDS)
    @settings(max_examples=20, deadline=None)
    @given(data=st.data())
    def test_arbitrary_payload_bytes(self, kind: Kind, data: st.DataObject) -> None:
        """Arbitrary bytes in payload frames give payloads or bad_payload, nothing else."""
        header = data.draw(valid_headers(kind))
        payloads = [data.draw(st.binary(max_size=32)) for _ in range(payload_frame_count(header))]
        try:
            _, decoded = decode_message([encode_header(header), *payloads])
        except WireError as exc:
            assert exc.reason == "bad_payload"
        else:
            assert all(type(payload) is PAYLOAD_TYPES[kind] for payload in decoded)

    def test_bad_payload_frame(self) -> None:
        """A payload frame that does not decode as its kind's struct is bad_payload."""
        header, _ = valid_message(Kind.HEARTBEAT)
        with pytest.raises(WireError) as info:
            decode_message([header, b"\xc1"])
        assert info.value.reason == "bad_payload"

    def test_batch_row_of_wrong_type(self) -> None:
        """A batch row whose columns do not fit the batch type is bad_payload."""
        header, _, _ = valid_message(Kind.TOKEN_BATCH)
        row = encode_payload({"rids": ["r0"], "output_ids": "not-a-column"})
        with pytest.raises(WireError) as info:
            decode_message([header, row, row])
        assert info.value.reason == "bad_payload"


class TestDecodePayload:
    """decode_payload decodes each kind's payload struct."""

    @pytest.mark.parametrize("kind", PAYLOAD_KINDS)
    def test_minimal_payload_roundtrips(self, kind: Kind) -> None:
        """A payload with only its required fields set decodes to an equal struct."""
        payload = minimal_instance(PAYLOAD_TYPES[kind])
        decoded = decode_payload(kind, encode_payload(payload))
        assert decoded == payload
        assert type(decoded) is PAYLOAD_TYPES[kind]

    def test_every_kind_but_idle_has_a_payload_type(self) -> None:
        """PAYLOAD_TYPES covers every kind except IDLE."""
        assert set(PAYLOAD_TYPES) == set(Kind) - {Kind.IDLE}

    def test_idle_has_no_payload(self) -> None:
        """Decoding a payload for IDLE is a no_payload error."""
        with pytest.raises(WireError) as info:
            decode_payload(Kind.IDLE, b"\x80")
        assert info.value.reason == "no_payload"

    @pytest.mark.parametrize("kind", PAYLOAD_KINDS)
    def test_missing_required_field_is_bad_payload(self, kind: Kind) -> None:
        """An empty map is bad_payload for kinds with a required field, else the defaults."""
        payload_type = PAYLOAD_TYPES[kind]
        required = [f for f in msgspec.structs.fields(payload_type) if f.required]
        if required:
            with pytest.raises(WireError) as info:
                decode_payload(kind, b"\x80")
            assert info.value.reason == "bad_payload"
            assert required[0].name in str(info.value)
        else:
            assert decode_payload(kind, b"\x80") == payload_type()


class TestFraming:
    """frame_message and frame_batch build messages that decode_message accepts."""

    def test_idle_is_a_single_frame(self) -> None:
        """An IDLE message is just its header frame."""
        frames = frame_message(Kind.IDLE, None)
        assert len(frames) == 1
        header, payloads = decode_message(frames)
        assert header.kind is Kind.IDLE
        assert payloads == []

    def test_frame_message_stamps_trace_context(self) -> None:
        """Trace context passed to frame_message travels in the header."""
        frames = frame_message(
            Kind.GENERATE,
            minimal_instance(PAYLOAD_TYPES[Kind.GENERATE]),
            rids=["r"],
            reply_to=[WORKER],
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            tracestate="sb=1",
        )
        header = decode_header(frames[0])
        assert header.traceparent.startswith("00-0af7651916cd43dd")
        assert header.tracestate == "sb=1"
        assert header.sent_ns > 0

    def test_frame_message_refuses_misshapen_header(self) -> None:
        """frame_message checks the header before encoding anything."""
        with pytest.raises(WireError) as info:
            frame_message(Kind.GENERATE, minimal_instance(PAYLOAD_TYPES[Kind.GENERATE]))
        assert info.value.reason == "header_shape"

    def test_frame_batch_needs_owners(self) -> None:
        """A batch without http_worker_ipcs cannot be routed and is refused."""
        with pytest.raises(WireError) as info:
            frame_batch(BatchTokenIDOutput(rids=["r"]))
        assert info.value.reason == "header_shape"

    def test_frame_batch_refuses_an_empty_batch(self) -> None:
        """A batch with no rows is refused (the idle batch is Kind.IDLE)."""
        with pytest.raises(WireError) as info:
            frame_batch(BatchTokenIDOutput(rids=[], http_worker_ipcs=[]))
        assert info.value.reason == "header_shape"
