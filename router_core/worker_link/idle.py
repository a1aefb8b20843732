"""The last-resort bound on a request's life: no output for too long ends it.

Every other fault is noticed by what the worker hears (a new engine incarnation, a new
router incarnation, a gap in a stream's tokens). What it cannot hear — the final row of
a request lost in a process that died, with nothing after it — would leave the request
waiting forever. So a stream that gets no row for ``idle_timeout_s`` while the worker is
not paused ends with a ``lost`` abort (cause ``idle_timeout``). A pause stops every clock:
paused in place, an engine sends nothing, and that is not a fault. Pure, time passed in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Final

from router_core.counters import Counters
from router_core.wire.finish import lost_reason
from router_core.worker_link.session import WorkerSession
from router_core.worker_link.streams import ResponseStream

__all__ = ["IDLE_CAUSE", "end_idle_streams", "watch_idle"]

#: The ``err_type`` of a request ended by the idle bound.
IDLE_CAUSE: Final = "idle_timeout"


def end_idle_streams(
    streams: Iterable[ResponseStream], *, now: float, idle_timeout_s: float, paused: bool
) -> list[ResponseStream]:
    """End every unfinished stream idle past ``idle_timeout_s``; return them.

    While ``paused``, every stream's clock restarts at ``now`` instead, so the bound
    counts only time spent unpaused.
    """
    ended: list[ResponseStream] = []
    for stream in streams:
        if stream.finished:
            continue
        if paused:
            stream.updated_at = now
        elif now - stream.updated_at > idle_timeout_s:
            message = (
                f"no output for {idle_timeout_s:g} s while not paused: a process on the "
                "output path may have died; the request was ended"
            )
            stream.close(lost_reason(IDLE_CAUSE, message))
            stream.lost_cause = IDLE_CAUSE
            ended.append(stream)
    return ended


async def watch_idle(
    streams: Mapping[str, ResponseStream],
    session: WorkerSession,
    counters: Counters,
    *,
    idle_timeout_s: float,
) -> None:
    """Run :func:`end_idle_streams` over a link's open streams a few times per bound,
    forever (the link cancels it), counting what it ends as ``lost_requests``. Each ended
    stream is aborted in the engine as its handler leaves it."""
    interval = min(1.0, idle_timeout_s / 4)
    while True:
        await asyncio.sleep(interval)
        ended = end_idle_streams(
            streams.values(),
            now=time.monotonic(),
            idle_timeout_s=idle_timeout_s,
            paused=session.paused,
        )
        if ended:
            counters.add("lost_requests", IDLE_CAUSE, len(ended))
