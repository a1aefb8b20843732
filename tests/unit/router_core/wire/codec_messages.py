"""Headers and messages for the codec tests: hypothesis strategies for headers, and
minimal, well-formed payloads and messages of every kind, read from msgspec."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from router_core.wire import (
    BATCH_KINDS,
    PAYLOAD_TYPES,
    Header,
    Kind,
    frame_batch,
    frame_message,
)

__all__ = [
    "ALL_KINDS",
    "ANY_HEADER",
    "PAYLOAD_KINDS",
    "SETTINGS",
    "SINGLE_REQUEST_KINDS",
    "WORKER",
    "minimal_instance",
    "minimal_value",
    "valid_headers",
    "valid_message",
]

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
