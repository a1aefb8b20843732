"""Tests for the wire codec's header frame: round trips, the byte layout docs/protocol.md
promises, each kind's shape rules, and the refusal of every undecodable frame."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router_core.wire import Header, Kind, WireError, check_header, decode_header, encode_header
from tests.unit.router_core.wire.codec_messages import (
    ALL_KINDS,
    ANY_HEADER,
    SETTINGS,
    valid_headers,
)


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
