"""Property tests for the generic column <-> row split of batched outputs.

The batches come from :mod:`tests.unit.router_core.wire.split_batches`, built from each
output type's fields with ``msgspec.inspect``, never from a hand-written field list, so a
field added to an output type is generated, split, framed and checked by every test here
without touching this file.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
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
    frame_batch,
    group_by_destination,
    split_rows,
)
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from tests.unit.router_core.wire.split_batches import (
    COLUMN_CASES,
    DICT_COLUMN_CASES,
    FIELD_CASES,
    OUTPUT_TYPE_CASES,
    OUTPUT_TYPES,
    PER_FIELD_SETTINGS,
    PROPERTY_SETTINGS,
    WORKER_POOL,
    batches,
    column_type_of,
    decoder_for,
    field_type_of,
    filler_column,
    output_fields,
    roundtrip_rows,
    take_rows,
)


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
                is_dict = isinstance(column_type_of(field.type), mi.DictType)
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
        field_type = field_type_of(batch_type, name)
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
            rids=["a"], **{name: filler_column(field_type_of(batch_type, name), 1)}
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
