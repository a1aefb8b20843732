"""Batches of every output type for the split tests, drawn from msgspec type information.

The strategies are built from each output type's fields with ``msgspec.inspect``, never
from a hand-written field list, so a field added to an output type is generated, split,
framed and checked by every split test without touching this file. :func:`take_rows` is
the oracle the split is compared against.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from router_core.wire import batch_columns, encode_payload, split_rows
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput

__all__ = [
    "COLUMN_CASES",
    "DICT_COLUMN_CASES",
    "FIELD_CASES",
    "OUTPUT_TYPES",
    "OUTPUT_TYPE_CASES",
    "PER_FIELD_SETTINGS",
    "PROPERTY_SETTINGS",
    "WORKER_POOL",
    "batches",
    "column_type_of",
    "decoder_for",
    "field_type_of",
    "filler_column",
    "output_fields",
    "roundtrip_rows",
    "take_rows",
]

OUTPUT_TYPES: tuple[type[msgspec.Struct], ...] = (
    BatchTokenIDOutput,
    BatchStrOutput,
    BatchEmbeddingOutput,
)

#: Return addresses rows are owned by; small so that most workers own several rows.
WORKER_POOL: tuple[str, ...] = (
    "ipc:///tmp/switchboard-test/worker-0",
    "ipc:///tmp/switchboard-test/worker-1",
    "ipc:///tmp/switchboard-test/worker-2",
)

MAX_ROWS = 12

#: Whether an optional column is present in a drawn batch: about one in four, as in a real
#: decode step, which keeps a 47-column batch cheap enough to draw a hundred of.
COLUMN_PRESENT = st.integers(0, 3).map(lambda roll: roll == 3)

PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PER_FIELD_SETTINGS = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------------------------------
# Strategies, derived from msgspec type information.
# ---------------------------------------------------------------------------------------

#: MessagePack carries integers in [-2**63, 2**64 - 1]; stay inside the signed range.
WIRE_INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SHORT_TEXT = st.text(max_size=8)
JSON_LIKE: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | WIRE_INTS | FINITE_FLOATS | SHORT_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(SHORT_TEXT, children, max_size=3)
    ),
    max_leaves=6,
)

_CONSTRAINTS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")


def _require_unconstrained(field_type: mi.Type) -> None:
    """Refuse constrained types, so a constraint added to an output type is noticed here."""
    for constraint in _CONSTRAINTS:
        if getattr(field_type, constraint, None) is not None:
            raise NotImplementedError(f"no strategy for constrained {field_type!r}")


def values_of(field_type: mi.Type) -> st.SearchStrategy[Any]:
    """Any one value of the msgspec type ``field_type``; fails loudly on unknown types."""
    _require_unconstrained(field_type)
    if isinstance(field_type, mi.BoolType):
        return st.booleans()
    if isinstance(field_type, mi.IntType):
        return WIRE_INTS
    if isinstance(field_type, mi.FloatType):
        return FINITE_FLOATS
    if isinstance(field_type, mi.StrType):
        return SHORT_TEXT
    if isinstance(field_type, mi.NoneType):
        return st.none()
    if isinstance(field_type, mi.AnyType):
        return JSON_LIKE
    if isinstance(field_type, mi.ListType):
        return st.lists(values_of(field_type.item_type), max_size=2)
    if isinstance(field_type, mi.DictType):
        return st.dictionaries(
            values_of(field_type.key_type), values_of(field_type.value_type), max_size=2
        )
    if isinstance(field_type, mi.UnionType):
        return st.one_of([values_of(member) for member in field_type.types])
    raise NotImplementedError(f"no strategy for {field_type!r}")


def column_type_of(field_type: mi.Type) -> mi.Type:
    members = field_type.types if isinstance(field_type, mi.UnionType) else (field_type,)
    (column_type,) = [member for member in members if not isinstance(member, mi.NoneType)]
    return column_type


def column_values(field_type: mi.Type, rows: int, *, min_keys: int = 0) -> st.SearchStrategy[Any]:
    """A present column of ``rows`` entries: a list, or a dict of str -> such lists."""
    column_type = column_type_of(field_type)
    if isinstance(column_type, mi.ListType):
        return st.lists(values_of(column_type.item_type), min_size=rows, max_size=rows)
    if isinstance(column_type, mi.DictType) and isinstance(column_type.value_type, mi.ListType):
        per_key = st.lists(
            values_of(column_type.value_type.item_type), min_size=rows, max_size=rows
        )
        return st.dictionaries(
            values_of(column_type.key_type), per_key, min_size=min_keys, max_size=3
        )
    raise NotImplementedError(f"{field_type!r} is not a per-request column")


def filler_value(field_type: mi.Type) -> Any:
    """The simplest value of ``field_type``, for tests where only the shape matters."""
    if isinstance(field_type, mi.UnionType):
        return filler_value(field_type.types[0])
    if isinstance(field_type, mi.ListType):
        return []
    if isinstance(field_type, mi.DictType):
        return {}
    simplest = {mi.BoolType: False, mi.IntType: 0, mi.FloatType: 0.0, mi.StrType: ""}
    return simplest.get(type(field_type))  # None for Any and None


def filler_column(field_type: mi.Type, rows: int) -> Any:
    """A present column of ``rows`` filler entries; a dict column gets one key."""
    column_type = column_type_of(field_type)
    if isinstance(column_type, mi.DictType):
        assert isinstance(column_type.value_type, mi.ListType)
        return {"key": [filler_value(column_type.value_type.item_type)] * rows}
    assert isinstance(column_type, mi.ListType)
    return [filler_value(column_type.item_type)] * rows


@cache
def output_fields(batch_type: type[msgspec.Struct]) -> tuple[mi.Field, ...]:
    """The fields of ``batch_type`` as msgspec sees them, in declaration order."""
    info = mi.type_info(batch_type)
    assert isinstance(info, mi.StructType)
    return info.fields


def field_type_of(batch_type: type[msgspec.Struct], name: str) -> mi.Type:
    (field,) = [field for field in output_fields(batch_type) if field.name == name]
    return field.type


def _unique_rids(rows: int) -> st.SearchStrategy[list[str]]:
    """Distinct hex request ids, as SGLang's uuid4().hex rids are."""
    ids = st.lists(st.integers(0, 2**128 - 1), min_size=rows, max_size=rows, unique=True)
    return ids.map(lambda numbers: [f"{number:032x}" for number in numbers])


def _owners_from_pool(rows: int) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(WORKER_POOL), min_size=rows, max_size=rows)


@cache
def present_column(
    batch_type: type[msgspec.Struct], name: str, rows: int, *, routed: bool = False
) -> st.SearchStrategy[Any]:
    """A present column ``name`` of ``batch_type`` with ``rows`` entries (built once, reused).

    Request ids are unique within a batch; with ``routed``, owners come from
    :data:`WORKER_POOL`. Every other column is derived from its msgspec type alone.
    """
    if name == "rids":
        return _unique_rids(rows)
    if routed and name == "http_worker_ipcs":
        return _owners_from_pool(rows)
    return column_values(field_type_of(batch_type, name), rows)


@st.composite
def batches(
    draw: st.DrawFn,
    batch_type: type[msgspec.Struct],
    *,
    routed: bool = False,
    only: str | None = None,
    every: bool = False,
    rows: st.SearchStrategy[int] | None = None,
) -> msgspec.Struct:
    """A well-shaped batch of ``batch_type`` with 1..12 rows.

    Each optional column is absent or present at random; with ``only`` every optional
    column but that one is absent and that one is present; with ``every`` all are present.
    With ``routed`` every row has an owner from :data:`WORKER_POOL`.
    """
    count = draw(rows if rows is not None else st.integers(1, MAX_ROWS))
    values: dict[str, Any] = {}
    for field in output_fields(batch_type):
        forced = field.required or every or field.name == only
        if routed and field.name == "http_worker_ipcs":
            forced = True
        if forced or (only is None and draw(COLUMN_PRESENT)):
            values[field.name] = draw(present_column(batch_type, field.name, count, routed=routed))
    return batch_type(**values)


def take_rows(batch: msgspec.Struct, indices: Sequence[int]) -> msgspec.Struct:
    """The oracle: a batch of the rows at ``indices``, built without the split module."""
    picked: dict[str, Any] = {}
    for field in output_fields(type(batch)):
        value = getattr(batch, field.name)
        if isinstance(value, dict):
            picked[field.name] = {
                key: [column[i] for i in indices] for key, column in value.items()
            }
        elif value is not None:
            picked[field.name] = [value[i] for i in indices]
    return type(batch)(**picked)


def roundtrip_rows(batch: msgspec.Struct) -> list[msgspec.Struct]:
    """Split ``batch``, encode each row, and decode each row as the batch's own type."""
    decoder = decoder_for(type(batch))
    return [decoder.decode(encode_payload(row)) for row in split_rows(batch)]


@cache
def decoder_for(batch_type: type[msgspec.Struct]) -> msgspec.msgpack.Decoder[Any]:
    """A decoder for ``batch_type``, built once (building one evaluates its annotations)."""
    return msgspec.msgpack.Decoder(batch_type)


FIELD_CASES = [
    pytest.param(batch_type, field.name, id=f"{batch_type.__name__}.{field.name}")
    for batch_type in OUTPUT_TYPES
    for field in msgspec.structs.fields(batch_type)
]
COLUMN_CASES = [case for case in FIELD_CASES if case.values[1] != "rids"]
DICT_COLUMN_CASES = [
    pytest.param(batch_type, column.name, id=f"{batch_type.__name__}.{column.name}")
    for batch_type in OUTPUT_TYPES
    for column in batch_columns(batch_type)
    if column.is_dict
]
OUTPUT_TYPE_CASES = [pytest.param(t, id=t.__name__) for t in OUTPUT_TYPES]
