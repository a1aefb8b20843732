"""Sending one message on a worker link's socket and counting what became of it."""

from __future__ import annotations

import zmq

from router_core.counters import Counters
from router_core.transport import send_frames
from router_core.wire.codec import Frames
from router_core.worker_link.outcomes import Count

__all__ = ["send_counted"]


def send_counted(
    sock: zmq.Socket[bytes] | None,
    frames: Frames,
    counters: Counters,
    sent: Count | None,
    unsent: Count | None,
) -> bool:
    """Send ``frames`` on ``sock`` without blocking, counting ``sent`` when ZeroMQ took
    them and ``unsent`` when it could not now or there is no socket (a closed link)."""
    if sock is not None and send_frames(sock, frames):
        if sent is not None:
            counters.add(*sent)
        return True
    if unsent is not None:
        counters.add(*unsent)
    return False
