"""Property tests for the generic column <-> row split of batched outputs.

The strategies below are built from each output type's fields with ``msgspec.inspect``,
never from a hand-written field list, so a field added to an output type is generated,
split, framed and checked by every test here without touching this file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from router_core.wire import (
    BatchShapeError,
    Kind,
    batch_columns,
    check_batch_shape,
    combine_rows,
    decode_header,
    decode_message,
    encode_payload,
    frame_batch,
    group_by_destination,
    split_rows,
)
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput

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


def _column_type(field_type: mi.Type) -> mi.Type:
    members = field_type.types if isinstance(field_type, mi.UnionType) else (field_type,)
    (column_type,) = [member for member in members if not isinstance(member, mi.NoneType)]
    return column_type


def column_values(field_type: mi.Type, rows: int, *, min_keys: int = 0) -> st.SearchStrategy[Any]:
    """A present column of ``rows`` entries: a list, or a dict of str -> such lists."""
    column_type = _column_type(field_type)
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
    column_type = _column_type(field_type)
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


def _field_type(batch_type: type[msgspec.Struct], name: str) -> mi.Type:
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
    return column_values(_field_type(batch_type, name), rows)


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


# ---------------------------------------------------------------------------------------
# Tests.
# ---------------------------------------------------------------------------------------


class TestBatchColumns:
    """batch_columns: every field of an output type is a splittable column."""

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    def test_every_field_is_a_column(self, batch_type: type[msgspec.Struct]) -> None:
        """Every field of every output type is a column, in declaration order."""
        fields = [field.name for field in msgspec.structs.fields(batch_type)]
        assert [column.name for column in batch_columns(batch_type)] == fields

    def test_dict_columns_are_flagged(self) -> None:
        """Exactly the dict-of-lists fields are flagged as dict columns."""
        for batch_type in OUTPUT_TYPES:
            for column, field in zip(
                batch_columns(batch_type), output_fields(batch_type), strict=True
            ):
                is_dict = isinstance(_column_type(field.type), mi.DictType)
                assert column.is_dict is is_dict, column.name

    @pytest.mark.parametrize(
        "field_type",
        [int, list[str] | dict[str, list[str]], dict[str, int] | None, str | None],
        ids=["scalar", "list-or-dict", "dict-of-scalars", "optional-scalar"],
    )
    def test_non_column_field_is_a_type_error(self, field_type: Any) -> None:
        """A struct with a field that is not a per-request column is refused by name."""
        not_a_batch = msgspec.defstruct(
            "NotABatch", [("rids", list[str]), ("step", field_type)], kw_only=True
        )
        with pytest.raises(TypeError, match=r"NotABatch\.step is not a per-request column"):
            batch_columns(not_a_batch)


class TestSplitRoundtrip:
    """split_rows -> encode_payload -> decode -> combine_rows is the identity."""

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    @PROPERTY_SETTINGS
    @given(data=st.data())
    def test_roundtrip_restores_the_batch(
        self, batch_type: type[msgspec.Struct], data: st.DataObject
    ) -> None:
        """Every row decodes as its own one-request batch and the rows recombine exactly."""
        batch = data.draw(batches(batch_type))
        decoded = roundtrip_rows(batch)
        assert check_batch_shape(batch) == len(decoded) == len(batch.rids)  # type: ignore[attr-defined]
        for index, row in enumerate(decoded):
            assert row == take_rows(batch, [index])
        assert combine_rows(batch_type, decoded) == batch

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    @settings(PROPERTY_SETTINGS, max_examples=25)
    @given(data=st.data())
    def test_batch_with_every_column_roundtrips(
        self, batch_type: type[msgspec.Struct], data: st.DataObject
    ) -> None:
        """A batch with every column present at once, dict columns included, roundtrips."""
        batch = data.draw(batches(batch_type, every=True, rows=st.integers(1, 4)))
        assert all(getattr(batch, field.name) is not None for field in output_fields(batch_type))
        assert combine_rows(batch_type, roundtrip_rows(batch)) == batch

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    def test_zero_rows_split_to_nothing(self, batch_type: type[msgspec.Struct]) -> None:
        """A batch with no rids splits into no rows."""
        assert split_rows(batch_type(rids=[])) == []

    @pytest.mark.parametrize(("batch_type", "name"), FIELD_CASES)
    @PER_FIELD_SETTINGS
    @given(data=st.data())
    def test_every_field_survives_the_split(
        self, batch_type: type[msgspec.Struct], name: str, data: st.DataObject
    ) -> None:
        """Each field, set alone beside rids, is generated non-None and survives a split."""
        batch = data.draw(batches(batch_type, only=name))
        value = getattr(batch, name)
        assert value is not None
        fields = output_fields(batch_type)
        present = {field.name for field in fields if getattr(batch, field.name) is not None}
        assert present == {"rids", name}
        restored = combine_rows(batch_type, roundtrip_rows(batch))
        assert getattr(restored, name) is not None
        assert getattr(restored, name) == value
        assert restored == batch


class TestFramedSplit:
    """frame_batch -> decode_message -> combine_rows, and per-worker delivery."""

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    @PROPERTY_SETTINGS
    @given(data=st.data())
    def test_framed_roundtrip_restores_the_batch(
        self, batch_type: type[msgspec.Struct], data: st.DataObject
    ) -> None:
        """A batch framed one row per request decodes and recombines to the original."""
        batch = data.draw(batches(batch_type, routed=True))
        frames = frame_batch(batch)  # type: ignore[arg-type]
        header, rows = decode_message(frames)
        assert header.rids == batch.rids  # type: ignore[attr-defined]
        assert header.reply_to == batch.http_worker_ipcs  # type: ignore[attr-defined]
        assert len(frames) == 1 + len(header.rids)
        assert combine_rows(batch_type, rows) == batch

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    @PROPERTY_SETTINGS
    @given(data=st.data())
    def test_each_row_reaches_its_owner(
        self, batch_type: type[msgspec.Struct], data: st.DataObject
    ) -> None:
        """Grouping by header.reply_to hands each worker exactly its rows, in order."""
        batch = data.draw(batches(batch_type, routed=True))
        owners: list[str] = batch.http_worker_ipcs  # type: ignore[attr-defined]
        frames = frame_batch(batch)  # type: ignore[arg-type]
        groups = group_by_destination(decode_header(frames[0]).reply_to)
        assert set(groups) == set(owners)
        decoder = decoder_for(batch_type)
        delivered_rids: list[str] = []
        for worker, indices in groups.items():
            assert indices == [i for i, owner in enumerate(owners) if owner == worker]
            delivered = combine_rows(batch_type, [decoder.decode(frames[1 + i]) for i in indices])
            assert delivered.http_worker_ipcs == [worker] * len(indices)
            assert delivered == take_rows(batch, indices)
            delivered_rids.extend(delivered.rids)
        assert Counter(delivered_rids) == Counter(batch.rids)  # type: ignore[attr-defined]
        assert all(count == 1 for count in Counter(delivered_rids).values())

    def test_batch_kinds_follow_the_output_type(self) -> None:
        """Each output type is framed under its own batch kind."""
        expected = {
            BatchTokenIDOutput: Kind.TOKEN_BATCH,
            BatchStrOutput: Kind.STR_BATCH,
            BatchEmbeddingOutput: Kind.EMBEDDING_BATCH,
        }
        for batch_type, kind in expected.items():
            batch = batch_type(rids=["r"], http_worker_ipcs=[WORKER_POOL[0]])
            assert decode_header(frame_batch(batch)[0]).kind is kind


class TestGroupByDestination:
    """group_by_destination: indices per destination, in row order."""

    def test_groups_keep_row_order(self) -> None:
        """Each destination maps to its row indices in ascending order, first seen first."""
        assert group_by_destination(["b", "a", "b", "c", "a"]) == {
            "b": [0, 2],
            "a": [1, 4],
            "c": [3],
        }
        assert list(group_by_destination(["b", "a", "b"])) == ["b", "a"]

    def test_no_destinations_no_groups(self) -> None:
        """An empty destination list gives no groups."""
        assert group_by_destination([]) == {}


class TestBatchShape:
    """check_batch_shape and combine_rows refuse batches that do not line up."""

    @pytest.mark.parametrize(("batch_type", "name"), COLUMN_CASES)
    def test_wrong_length_column_is_named(
        self, batch_type: type[msgspec.Struct], name: str
    ) -> None:
        """A column with more or fewer entries than rids is refused, naming the column."""
        field_type = _field_type(batch_type, name)
        for wrong in (0, 1, 3):
            broken = batch_type(rids=["a", "b"], **{name: filler_column(field_type, wrong)})
            message = re.escape(f"{batch_type.__name__}.{name}") + r"\b"
            with pytest.raises(BatchShapeError, match=message):
                check_batch_shape(broken)
            with pytest.raises(BatchShapeError, match=message):
                split_rows(broken)

    @pytest.mark.parametrize(("batch_type", "name"), COLUMN_CASES)
    def test_mixed_presence_is_refused(self, batch_type: type[msgspec.Struct], name: str) -> None:
        """Rows that disagree on whether a column is present do not combine."""
        with_column = batch_type(
            rids=["a"], **{name: filler_column(_field_type(batch_type, name), 1)}
        )
        without_column = batch_type(rids=["b"])
        message = f"column {name} is present in only some rows"
        for rows in ([with_column, without_column], [without_column, with_column]):
            with pytest.raises(BatchShapeError, match=message):
                combine_rows(batch_type, rows)

    @pytest.mark.parametrize(("batch_type", "name"), DICT_COLUMN_CASES)
    def test_dict_columns_with_different_keys_are_refused(
        self, batch_type: type[msgspec.Struct], name: str
    ) -> None:
        """Rows whose dict column has different keys do not combine."""
        first = batch_type(rids=["a"], **{name: {"k1": [1]}})
        second = batch_type(rids=["b"], **{name: {"k2": [2]}})
        with pytest.raises(BatchShapeError, match=f"dict column {name} has different keys"):
            combine_rows(batch_type, [first, second])

    @pytest.mark.parametrize("batch_type", OUTPUT_TYPE_CASES)
    def test_zero_rows_are_refused(self, batch_type: type[msgspec.Struct]) -> None:
        """Combining no rows is an error, not an empty batch."""
        with pytest.raises(BatchShapeError, match=f"zero rows of {batch_type.__name__}"):
            combine_rows(batch_type, [])
