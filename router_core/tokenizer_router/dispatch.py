"""One table per inbound socket: message kind -> (payload struct, handler).

A message reaches a table once its header and frame count are valid
(:func:`router_core.inbound.accept`). The table finds the kind's entry, decodes the
payload (with the codec, as the entry's struct) and calls its handler, which returns
effects. A kind with no entry is ``rejected{unexpected_kind}``; a payload that does not
decode is rejected with the codec's reason; either way the loop goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import msgspec

from router_core.counters import Counters
from router_core.tokenizer_router.effects import Effect, Instant
from router_core.wire import PAYLOAD_TYPES, Header, Kind, WireError, decode_payload

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["Decoded", "InboundTable", "Raw"]

PayloadT = TypeVar("PayloadT", bound=msgspec.Struct)

#: The frames of one message: the header frame, then its payload frames.
Frames = Sequence["FrameLike"]


class Decoded(Generic[PayloadT]):
    """A kind whose single payload frame is decoded as ``struct`` for ``handler``.

    ``handler(payload, frames, at)`` gets the frames too, to count or pass them on.
    """

    __slots__ = ("handler", "struct")

    def __init__(
        self,
        struct: type[PayloadT],
        handler: Callable[[PayloadT, Frames, Instant], list[Effect]],
    ) -> None:
        self.struct = struct
        self.handler = handler

    def handle(
        self, header: Header, frames: Frames, at: Instant, counters: Counters
    ) -> list[Effect]:
        """Decode the payload (the codec's decoder for the kind, whose struct
        :class:`InboundTable` checked is ``struct``) and run the handler; nothing, counted
        with the codec's reason, if it does not decode."""
        frame = frames[1]
        try:
            payload = decode_payload(
                header.kind, frame if isinstance(frame, bytes) else frame.buffer
            )
        except WireError as exc:
            counters.add("rejected", exc.reason)
            return []
        return self.handler(cast(PayloadT, payload), frames, at)


class Raw:
    """A kind handled from its header and frames, payload frames untouched (batches)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Callable[[Header, Frames, Instant], list[Effect]]) -> None:
        self.handler = handler

    def handle(
        self, header: Header, frames: Frames, at: Instant, counters: Counters
    ) -> list[Effect]:
        """Run the handler."""
        return self.handler(header, frames, at)


class InboundTable:
    """The entries of one inbound socket, by kind."""

    def __init__(self, entries: Mapping[Kind, Decoded[Any] | Raw], counters: Counters) -> None:
        for kind, entry in entries.items():
            if isinstance(entry, Decoded) and PAYLOAD_TYPES.get(kind) is not entry.struct:
                raise ValueError(f"{kind.name} does not carry a {entry.struct.__name__}")
        self.entries = dict(entries)
        self._counters = counters

    def dispatch(self, header: Header, frames: Frames, at: Instant) -> list[Effect]:
        """Handle one validated message; the effects its handler asks for."""
        entry = self.entries.get(header.kind)
        if entry is None:
            self._counters.add("rejected", "unexpected_kind")
            return []
        return entry.handle(header, frames, at, self._counters)
