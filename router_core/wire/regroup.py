"""Regrouping a framed batch: the message that carries only some of its rows.

Splitting a batch per destination is handing row frames to new messages; a row frame is
never decoded, only a new header is written. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from router_core.wire.codec import encode_header
from router_core.wire.header import Header

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["regroup"]


def regroup(
    header: Header, frames: Sequence[FrameLike], rows: Sequence[int]
) -> Sequence[FrameLike]:
    """The message carrying only ``rows`` of a batch message.

    A new header names those rows' rids and owners (and trace contexts); the row frames
    themselves pass through untouched. When ``rows`` is the whole batch, the message is
    reused as is.
    """
    if len(rows) == len(header.rids):
        return frames
    sub_header = Header(
        header.kind,
        [header.rids[i] for i in rows],
        [header.reply_to[i] for i in rows],
        header.sent_ns,
        header.traceparent,
        header.tracestate,
        _subset(header.row_traces, rows),
    )
    return [encode_header(sub_header), *(frames[i + 1] for i in rows)]


def _subset(row_traces: list[str], rows: Sequence[int]) -> list[str]:
    """The trace contexts of ``rows``; empty when none of them is traced."""
    if not row_traces:
        return []
    chosen = [row_traces[i] for i in rows]
    return chosen if any(chosen) else []
