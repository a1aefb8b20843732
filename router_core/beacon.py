"""An output-path process's incarnation, said to the tokenizer router once a second.

The detokenizer router and each detokenizer make an :class:`IncarnationBeacon` when they
start (its incarnation is that moment, Unix ns) and ask it in their loop's tick whether
the next :class:`~router_core.wire.control.UpstreamIncarnation` is due. The router
passes a new incarnation on to the workers, which then end the requests whose rows died
with the old process (``router_core.worker_link.idle``). A beacon carries the stack key
(a router that has one refuses beacons without it). Pure: time comes in.
"""

from __future__ import annotations

import time
from typing import Final

from router_core.wire import Kind, frame_message
from router_core.wire.codec import Frames
from router_core.wire.control import UpstreamIncarnation

__all__ = ["BEACON_INTERVAL_S", "MAX_UPSTREAM_PROCESSES", "IncarnationBeacon"]

#: Seconds between beacons: how soon after a restart the workers can know of it.
BEACON_INTERVAL_S: Final = 1.0

#: Output-path processes a router or a worker remembers at most.
MAX_UPSTREAM_PROCESSES: Final = 256


class IncarnationBeacon:
    """``process``'s beacon (``detokenizer-router``, ``detokenizer-<j>``), carrying ``key``
    (the stack key; None: none)."""

    def __init__(
        self,
        process: str,
        *,
        incarnation: int | None = None,
        interval_s: float = BEACON_INTERVAL_S,
        key: str | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.process = process
        self._key = key or ""
        self.incarnation = time.time_ns() if incarnation is None else incarnation
        self.interval_s = interval_s
        self._next = 0.0

    def due(self, now: float) -> Frames | None:
        """The message to send if one is due at ``now`` (monotonic seconds), else None.

        A sender skips a due beacon while its socket has a backlog (the router is away):
        beacons repeat, so the next one replaces it rather than queueing behind it."""
        if now < self._next:
            return None
        self._next = now + self.interval_s
        news = UpstreamIncarnation(self.process, self.incarnation, key=self._key)
        return frame_message(Kind.UPSTREAM, news)

    def next_due(self) -> float:
        """When the next beacon is due (monotonic seconds)."""
        return self._next
