"""One table per inbound socket: message kind -> (payload struct, handler).

A message reaches a table once its header and frame count are valid
(:func:`router_core.inbound.accept`). The table finds the kind's entry, decodes the
payload as the entry's struct and calls its handler, which returns effects. A kind with
no entry is ``rejected{unexpected_kind}``; a payload that does not decode is rejected
with the codec's reason; either way the loop goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from router_core.counters import Counters
from router_core.tokenizer_router.effects import Effect, Instant
from router_core.wire import Header, Kind

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

    __slots__ = ("_decoder", "handler", "struct")

    def __init__(
        self,
        struct: type[PayloadT],
        handler: Callable[[PayloadT, Frames, Instant], list[Effect]],
    ) -> None:
        self.struct = struct
        self.handler = handler
        self._decoder = msgspec.msgpack.Decoder(struct)

    def handle(
        self, header: Header, frames: Frames, at: Instant, counters: Counters
    ) -> list[Effect]:
        """Decode the payload and run the handler; nothing (counted) if it does not decode."""
        try:
            # A zmq.Frame (the pure-Python receive path) exposes the buffer protocol.
            payload = self._decoder.decode(frames[1])  # type: ignore[arg-type]
        except msgspec.DecodeError:
            counters.add("rejected", "bad_payload")
            return []
        return self.handler(payload, frames, at)


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
        self.entries = dict(entries)
        self._counters = counters

    def dispatch(self, header: Header, frames: Frames, at: Instant) -> list[Effect]:
        """Handle one validated message; the effects its handler asks for."""
        entry = self.entries.get(header.kind)
        if entry is None:
            self._counters.add("rejected", "unexpected_kind")
            return []
        return entry.handle(header, frames, at, self._counters)
