"""Encoding and decoding of frames: MessagePack via msgspec, never pickle.

A message is ``[header, payload_0, ..., payload_k]``; :func:`payload_frame_count` says
what ``k`` is for each kind. Anything that does not decode or does not fit its kind's
shape raises :class:`WireError` with a short ``reason`` that callers count.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from router_core.wire.control import (
    Acknowledgement,
    ContinueRequest,
    Deregistration,
    DrainCommand,
    FreezeGC,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    PauseRequest,
    RegistrationReply,
    UpstreamIncarnation,
    WorkerRegistration,
)
from router_core.wire.engine_commands import CommandReply, EngineCommand
from router_core.wire.header import Header, payload_frame_count
from router_core.wire.kinds import BATCH_KINDS, Kind
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from router_core.wire.split import BatchShapeError, check_batch_shape, split_rows

__all__ = [
    "PAYLOAD_TYPES",
    "Frames",
    "WireError",
    "check_header",
    "decode_header",
    "decode_message",
    "decode_payload",
    "encode_header",
    "encode_payload",
    "frame_batch",
    "frame_message",
]

#: A message as it travels: a list of frames, header first.
Frames = list[bytes]

#: The payload struct of each kind; a batch kind's payload frames are one-row batches.
PAYLOAD_TYPES: Final[dict[Kind, type[msgspec.Struct]]] = {
    Kind.GENERATE: GenerateRequest,
    Kind.EMBED: EmbeddingRequest,
    Kind.ABORT: AbortRequest,
    Kind.REGISTER: WorkerRegistration,
    Kind.REGISTER_REPLY: RegistrationReply,
    Kind.HEARTBEAT: Heartbeat,
    Kind.DEREGISTER: Deregistration,
    Kind.DRAIN: DrainCommand,
    Kind.UPSTREAM: UpstreamIncarnation,
    Kind.PAUSE: PauseRequest,
    Kind.CONTINUE: ContinueRequest,
    Kind.PAUSE_BROADCAST: PauseContinueBroadcast,
    Kind.ACK: Acknowledgement,
    Kind.COMMAND_REPLY: CommandReply,
    Kind.FREEZE_GC: FreezeGC,
    Kind.LOAD: LoadSnapshot,
    Kind.ENGINE_COMMAND: EngineCommand,
    Kind.TOKEN_BATCH: BatchTokenIDOutput,
    Kind.STR_BATCH: BatchStrOutput,
    Kind.EMBEDDING_BATCH: BatchEmbeddingOutput,
}

_BATCH_KIND_OF: Final[dict[type[msgspec.Struct], Kind]] = {
    BatchTokenIDOutput: Kind.TOKEN_BATCH,
    BatchStrOutput: Kind.STR_BATCH,
    BatchEmbeddingOutput: Kind.EMBEDDING_BATCH,
}

#: Kinds whose header names exactly one request and its owner.
_SINGLE_REQUEST_KINDS: Final = frozenset({Kind.GENERATE, Kind.EMBED})

_ENCODER: Final = msgspec.msgpack.Encoder()
_HEADER_DECODER: Final = msgspec.msgpack.Decoder(Header)
_PAYLOAD_DECODERS: Final = {
    kind: msgspec.msgpack.Decoder(struct) for kind, struct in PAYLOAD_TYPES.items()
}


class WireError(ValueError):
    """A frame or message that breaks the protocol; ``reason`` is a short metric label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def encode_header(header: Header) -> bytes:
    """Encode a header frame."""
    return _ENCODER.encode(header)


def encode_payload(payload: msgspec.Struct | dict[str, Any]) -> bytes:
    """Encode one payload frame (a struct, or a row mapping from ``split_rows``)."""
    return _ENCODER.encode(payload)


def check_header(header: Header) -> None:
    """Raise :class:`WireError` if ``header`` breaks the shape rules of its kind."""
    if len(header.rids) != len(header.reply_to) and header.kind is not Kind.ABORT:
        raise WireError("header_shape", "rids and reply_to differ in length")
    if header.kind in _SINGLE_REQUEST_KINDS and len(header.rids) != 1:
        raise WireError("header_shape", f"{header.kind.name} names {len(header.rids)} rids")
    if header.kind is Kind.ABORT and (len(header.reply_to) != 1 or len(header.rids) > 1):
        raise WireError("header_shape", "ABORT needs one reply_to and at most one rid")
    if header.kind in BATCH_KINDS and not header.rids:
        raise WireError("header_shape", f"{header.kind.name} with no rows (use IDLE)")
    if header.kind is Kind.IDLE and header.rids:
        raise WireError("header_shape", "IDLE names no requests")
    if header.row_traces and (
        header.kind not in BATCH_KINDS or len(header.row_traces) != len(header.rids)
    ):
        raise WireError("header_shape", "row_traces needs a batch and one entry per row")


def decode_header(frame: bytes | memoryview) -> Header:
    """Decode and shape-check a header frame."""
    try:
        header = _HEADER_DECODER.decode(frame)
    except msgspec.DecodeError as exc:
        raise WireError("bad_header", str(exc)) from exc
    except RecursionError:  # nested deeper than the decoder goes (skipped extras too)
        raise WireError("too_deep", "the header is nested too deeply") from None
    check_header(header)
    return header


def decode_payload(kind: Kind, frame: bytes | memoryview) -> msgspec.Struct:
    """Decode one payload frame of ``kind``."""
    try:
        return _PAYLOAD_DECODERS[kind].decode(frame)
    except KeyError as exc:
        raise WireError("no_payload", f"{kind.name} carries no payload") from exc
    except msgspec.DecodeError as exc:
        raise WireError("bad_payload", f"{kind.name}: {exc}") from exc
    except RecursionError:
        raise WireError("too_deep", f"{kind.name}: the payload is nested too deeply") from None


def decode_message(frames: Sequence[bytes | memoryview]) -> tuple[Header, list[msgspec.Struct]]:
    """Decode a whole message, checking the frame count and, for batches, every row.

    Row ``i`` of a batch must be a one-request batch for ``header.rids[i]``.
    """
    if not frames:
        raise WireError("frame_count", "empty message")
    header = decode_header(frames[0])
    expected = payload_frame_count(header)
    if len(frames) - 1 != expected:
        raise WireError(
            "frame_count",
            f"{header.kind.name} needs {expected} payload frames, got {len(frames) - 1}",
        )
    payloads = [decode_payload(header.kind, frame) for frame in frames[1:]]
    if header.kind in BATCH_KINDS:
        for rid, row in zip(header.rids, payloads, strict=True):
            _check_row(rid, row)
    return header, payloads


def _check_row(rid: str, row: msgspec.Struct) -> None:
    try:
        rows = check_batch_shape(row)
    except BatchShapeError as exc:
        raise WireError("bad_payload", str(exc)) from exc
    if rows != 1 or row.rids[0] != rid:  # type: ignore[attr-defined]
        raise WireError("bad_payload", f"row for {rid!r} is not a one-request batch of it")


def frame_message(
    kind: Kind,
    payload: msgspec.Struct | None,
    *,
    rids: Sequence[str] = (),
    reply_to: Sequence[str] = (),
    traceparent: str = "",
    tracestate: str = "",
) -> Frames:
    """Frame a message with one payload (none for ``IDLE``; batches use :func:`frame_batch`)."""
    if kind in BATCH_KINDS:
        raise WireError("header_shape", f"{kind.name} is framed by frame_batch")
    if kind is Kind.IDLE:
        if payload is not None:
            raise WireError("bad_payload", "IDLE carries no payload")
    elif not isinstance(payload, PAYLOAD_TYPES[kind]):
        raise WireError("bad_payload", f"{kind.name} carries {PAYLOAD_TYPES[kind].__name__}")
    header = Header(
        kind,
        list(rids),
        list(reply_to),
        time.time_ns(),
        traceparent,
        tracestate,
    )
    check_header(header)
    if payload is None:
        return [encode_header(header)]
    return [encode_header(header), _ENCODER.encode(payload)]


def frame_batch(
    batch: BatchTokenIDOutput | BatchStrOutput | BatchEmbeddingOutput,
    *,
    traceparent: str = "",
    tracestate: str = "",
    row_traces: Sequence[str] = (),
) -> Frames:
    """Frame a column-shaped batch as ``[header, row_0, ..., row_n]``.

    ``batch.http_worker_ipcs`` must name the owner of every row; it becomes the header's
    ``reply_to`` so that routers split the batch without decoding any row. ``row_traces``
    is empty or one trace context per row (see :class:`Header`).
    """
    kind = _BATCH_KIND_OF.get(type(batch))
    if kind is None:
        raise WireError("bad_payload", f"{type(batch).__name__} is not a batched output type")
    owners = batch.http_worker_ipcs
    if owners is None:
        raise WireError("header_shape", "a batch needs http_worker_ipcs to be routed")
    try:
        check_batch_shape(batch)
    except BatchShapeError as exc:
        raise WireError("bad_payload", str(exc)) from exc
    header = Header(
        kind,
        batch.rids,
        owners,
        time.time_ns(),
        traceparent,
        tracestate,
        list(row_traces) if any(row_traces) else [],
    )
    check_header(header)
    return [encode_header(header), *(_ENCODER.encode(row) for row in split_rows(batch))]
