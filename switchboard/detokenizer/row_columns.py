"""The columns of one-request rows the detokenizer reads and writes: pure functions.

A :class:`~router_core.wire.outputs.BatchTokenIDOutput` row arrives holding one request;
its :class:`~router_core.wire.outputs.BatchStrOutput` leaves with every column the two
share copied as it is (none named one by one, so a column added to both travels).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.split import batch_columns

__all__ = [
    "MAX_CONTEXT_IDS",
    "SHARED_COLUMNS",
    "finished_row",
    "first_value",
    "prompt_context",
    "str_row",
]

#: Prompt ids a request's text is decoded after, at most (SGLang sends 5).
MAX_CONTEXT_IDS: Final = 8

#: Columns a token row and a text row share, copied as they are (never named one by one).
SHARED_COLUMNS: Final = tuple(
    column.name
    for column in batch_columns(BatchStrOutput)
    if column.name in {c.name for c in batch_columns(BatchTokenIDOutput)}
)


def str_row(row: BatchTokenIDOutput, owner: str, text: str) -> BatchStrOutput:
    """The one-request ``BatchStrOutput`` of ``row``: every shared column, and the text."""
    fields: dict[str, Any] = {}
    for name in SHARED_COLUMNS:
        value = getattr(row, name)
        if value is not None:
            fields[name] = value
    fields["http_worker_ipcs"] = [owner]
    fields["output_strs"] = [text]
    return BatchStrOutput(**fields)


def first_value(column: list[Any] | None, default: Any) -> Any:
    """The first value of a one-request ``column``, or ``default`` when absent."""
    if not column or column[0] is None:
        return default
    return column[0]


def prompt_context(row: BatchTokenIDOutput) -> list[int]:
    """The prompt ids a request's first ``row`` says its output continues (maybe none).

    They are ``decode_ids[:read_offsets]`` (the last :data:`MAX_CONTEXT_IDS` of them),
    trusted only when ``decode_ids[read_offsets:]`` is exactly the row's ``output_ids``:
    an engine that fills the columns otherwise gets no context, as if it sent none.
    """
    ids: list[int] | None = first_value(row.decode_ids, None)
    offset: int | None = first_value(row.read_offsets, None)
    if not ids or offset is None or not 0 < offset <= len(ids):
        return []
    if ids[offset:] != first_value(row.output_ids, []):
        return []
    return ids[max(0, offset - MAX_CONTEXT_IDS) : offset]


def finished_row(row: BatchTokenIDOutput, owner: str, reason: dict[str, Any]) -> BatchStrOutput:
    """``row``'s text row, finishing for ``reason``, with no text."""
    return msgspec.structs.replace(str_row(row, owner, ""), finished_reasons=[reason])
