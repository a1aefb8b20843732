"""Tests for the wire codec's messages: the frame-count rules, payload decoding and
framing."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router_core.wire import (
    BATCH_KINDS,
    PAYLOAD_TYPES,
    Header,
    Kind,
    WireError,
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
from tests.unit.router_core.wire.codec_messages import (
    ALL_KINDS,
    PAYLOAD_KINDS,
    WORKER,
    minimal_instance,
    valid_headers,
    valid_message,
)


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
