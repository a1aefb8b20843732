"""Generic per-request split of batched outputs, driven by the struct's fields.

Every field of a batched output is a per-request column (see
:mod:`router_core.wire.outputs`): a list indexed like ``rids``, or a dict of such lists.
:func:`split_rows` transposes any such batch into one row per request and
:func:`combine_rows` transposes rows back; neither names a single field, so a field added
to an output type is split correctly without touching this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple, TypeVar

import msgspec

__all__ = [
    "BatchShapeError",
    "Column",
    "batch_columns",
    "check_batch_shape",
    "combine_rows",
    "group_by_destination",
    "split_rows",
]

BatchT = TypeVar("BatchT", bound=msgspec.Struct)


class BatchShapeError(ValueError):
    """A batch whose columns do not line up with its ``rids``."""


class Column(NamedTuple):
    """One per-request field of a batch type."""

    name: str
    is_dict: bool


@cache
def batch_columns(batch_type: type[msgspec.Struct]) -> tuple[Column, ...]:
    """The per-request columns of ``batch_type``, in declaration order.

    Raises ``TypeError`` for a field that is neither a list nor a dict of lists, so a
    field that cannot be split is caught when the type is first used, not mid-stream.
    """
    info = msgspec.inspect.type_info(batch_type)
    assert isinstance(info, msgspec.inspect.StructType)
    columns = []
    for field in info.fields:
        kinds = _non_null_types(field.type)
        if len(kinds) == 1 and isinstance(kinds[0], msgspec.inspect.ListType):
            columns.append(Column(field.name, is_dict=False))
        elif (
            len(kinds) == 1
            and isinstance(kinds[0], msgspec.inspect.DictType)
            and isinstance(kinds[0].value_type, msgspec.inspect.ListType)
        ):
            columns.append(Column(field.name, is_dict=True))
        else:
            raise TypeError(f"{batch_type.__name__}.{field.name} is not a per-request column")
    return tuple(columns)


def _non_null_types(field_type: msgspec.inspect.Type) -> list[msgspec.inspect.Type]:
    if isinstance(field_type, msgspec.inspect.UnionType):
        return [t for t in field_type.types if not isinstance(t, msgspec.inspect.NoneType)]
    return [field_type]


def check_batch_shape(batch: msgspec.Struct) -> int:
    """Return the number of rows, or raise :class:`BatchShapeError` naming the bad column."""
    rows = len(batch.rids)  # type: ignore[attr-defined]
    for column in batch_columns(type(batch)):
        value = getattr(batch, column.name)
        if value is None:
            continue
        lists = value.items() if column.is_dict else ((column.name, value),)
        for key, values in lists:
            if len(values) != rows:
                where = f"[{key!r}]" if column.is_dict else ""
                raise BatchShapeError(
                    f"{type(batch).__name__}.{column.name}{where} has {len(values)} "
                    f"entries for {rows} rids"
                )
    return rows


def split_rows(batch: msgspec.Struct) -> list[dict[str, Any]]:
    """Transpose ``batch`` into one row per request.

    Row ``i`` is a mapping shaped like a one-request batch of the same type (every
    present column holds one entry), so it encodes to bytes that decode as that type.
    Absent (``None``) columns are left out of every row.
    """
    rows = check_batch_shape(batch)
    lists: list[tuple[str, list[Any]]] = []
    dicts: list[tuple[str, dict[str, list[Any]]]] = []
    for column in batch_columns(type(batch)):
        value = getattr(batch, column.name)
        if value is None:
            continue
        (dicts if column.is_dict else lists).append((column.name, value))
    if not dicts:
        return [{name: [values[i]] for name, values in lists} for i in range(rows)]
    out = []
    for i in range(rows):
        row: dict[str, Any] = {name: [values[i]] for name, values in lists}
        for name, mapping in dicts:
            row[name] = {key: [values[i]] for key, values in mapping.items()}
        out.append(row)
    return out


def combine_rows(batch_type: type[BatchT], rows: Sequence[BatchT]) -> BatchT:
    """Concatenate one-or-more-request batches of ``batch_type`` into one batch.

    The inverse of :func:`split_rows`. A column must be present in all rows or in none;
    a dict column must have the same keys in every row.
    """
    if not rows:
        raise BatchShapeError(f"cannot combine zero rows of {batch_type.__name__}")
    fields: dict[str, Any] = {}
    for column in batch_columns(batch_type):
        parts = [getattr(row, column.name) for row in rows]
        present = [part for part in parts if part is not None]
        if not present:
            continue
        if len(present) != len(parts):
            raise BatchShapeError(f"column {column.name} is present in only some rows")
        if column.is_dict:
            keys = parts[0].keys()
            if any(part.keys() != keys for part in parts):
                raise BatchShapeError(f"dict column {column.name} has different keys per row")
            fields[column.name] = {key: [v for part in parts for v in part[key]] for key in keys}
        else:
            fields[column.name] = [v for part in parts for v in part]
    return batch_type(**fields)


def group_by_destination(destinations: Sequence[str]) -> dict[str, list[int]]:
    """Map each distinct destination to the indices of its rows, in row order."""
    groups: dict[str, list[int]] = {}
    for index, destination in enumerate(destinations):
        bucket = groups.get(destination)
        if bucket is None:
            groups[destination] = [index]
        else:
            bucket.append(index)
    return groups
