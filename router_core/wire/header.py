"""The header frame that leads every message.

A header is a MessagePack array (``array_like``) so that routers decode it in well under a
microsecond and never touch the payload frames that follow it.
"""

from __future__ import annotations

import msgspec

from router_core.wire.kinds import BATCH_KINDS, Kind

__all__ = ["Header", "payload_frame_count"]


class Header(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """Routing facts about one message.

    ``rids[i]`` is owned by the worker whose return address is ``reply_to[i]`` (the seed's
    ``http_worker_ipc``). ``traceparent``/``tracestate`` carry W3C trace context of a
    single-request message and ``sent_ns`` the sender's wall clock (``time.time_ns()``) at
    send time. ``row_traces`` is a batch's per-row trace context: empty when no row is
    traced, else one W3C ``traceparent`` per row (``""`` for a row that is not). Only
    sampled contexts travel, so a hop makes a span exactly when a context is present.
    """

    kind: Kind
    rids: list[str] = []
    reply_to: list[str] = []
    sent_ns: int = 0
    traceparent: str = ""
    tracestate: str = ""
    row_traces: list[str] = []


def payload_frame_count(header: Header) -> int:
    """How many frames follow this header: one per row for batches, none for idle, else one."""
    if header.kind in BATCH_KINDS:
        return len(header.rids)
    if header.kind is Kind.IDLE:
        return 0
    return 1
