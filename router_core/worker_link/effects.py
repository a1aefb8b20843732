"""What the worker link's inbound core asks of its shell, as data.

:class:`~router_core.worker_link.dispatch.InboundDispatch` decides and returns a list of
effects; the shell (:class:`~router_core.worker_link.link.WorkerLink`) carries them out
in the order given. Order matters: a pause's acknowledgement goes out before the link
wakes the requests waiting for admission, and a restarted router's registration reply
is answered before the requests it may have lost are sent again.

The time comes in as an :class:`Instant` (the tokenizer router's clock value: ``mono``
for the streams' idle clocks, ``wall`` for hop latencies), taken by the shell as a
message is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from router_core.tokenizer_router.effects import FreezeGarbageCollector, Instant
from router_core.wire.codec import Frames
from router_core.worker_link.outcomes import CONTROL_DROPPED, Count

__all__ = [
    "Channel",
    "Effect",
    "FreezeGarbageCollector",
    "Instant",
    "OutputsReceived",
    "Send",
    "SessionChanged",
]

#: Which PUSH to the router a message leaves by.
Channel = Literal["requests", "control"]


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frames`` to the router on ``channel`` without blocking.

    ``sent`` is counted once ZeroMQ took the message, ``unsent`` when the router could
    not take it now (as :meth:`~router_core.worker_link.sockets.LinkSockets.send`).
    """

    channel: Channel
    frames: Frames
    sent: Count | None = None
    unsent: Count | None = CONTROL_DROPPED


@dataclass(frozen=True, slots=True)
class SessionChanged:
    """A registration reply, pause broadcast or drain was applied: admission may have
    opened and the reported state may differ (the shell wakes waiters and the timer)."""


@dataclass(frozen=True, slots=True)
class OutputsReceived:
    """An output message's rows were delivered: its hop latency (seconds from the
    sender's ``sent_ns``; None if unstamped), row count and size in bytes, for the
    link's outputs observer."""

    latency_s: float | None
    rows: int
    nbytes: int


#: Anything the inbound core may ask for.
Effect = Send | SessionChanged | OutputsReceived | FreezeGarbageCollector
