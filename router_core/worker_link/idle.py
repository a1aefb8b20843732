"""Bounds on a request's life when its output stops: the ends no row brings.

Most faults are noticed by what the worker hears: a new engine incarnation, a new router
incarnation, a gap in a stream's tokens. Rows that died in a process with nothing after
them (a request's final row, queued in a detokenizer that was killed) bring nothing to
notice, and would leave the request waiting forever. Two bounds end such a request with
a ``lost`` abort:

* when an output-path process restarted (the worker hears its new incarnation), every
  stream that was producing must get a row within ``grace_s``, or its rows died with
  that process (cause ``rows_lost``): a running request gets a row every engine step;
* as the last resort, a stream that gets no row for ``idle_timeout_s`` (cause
  ``idle_timeout``), which also covers a request that never produced.

A worker on another host also ends every stream at once when its connection to the
worker gateway is lost (cause ``control_unreachable``, :func:`end_unreachable_streams`):
what the control host sends meanwhile cannot reach it.

A pause stops every clock: paused in place, an engine sends nothing, and that is not a
fault. Pure, time passed in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Final

from router_core.counters import Counters
from router_core.wire.finish import lost_reason
from router_core.worker_link.session import WorkerSession
from router_core.worker_link.streams import ROWS_LOST_CAUSE, ResponseStream

__all__ = [
    "IDLE_CAUSE",
    "UNREACHABLE_CAUSE",
    "end_idle_streams",
    "end_unreachable_streams",
    "suspect_streams",
    "watch_idle",
]

#: The ``err_type`` of a request ended by the idle bound.
IDLE_CAUSE: Final = "idle_timeout"
#: The ``err_type`` of a request ended because the control host became unreachable.
UNREACHABLE_CAUSE: Final = "control_unreachable"


def end_unreachable_streams(streams: Iterable[ResponseStream]) -> list[ResponseStream]:
    """The connection to the control host is lost: end every unfinished stream with a
    ``lost`` abort (cause :data:`UNREACHABLE_CAUSE`); return them."""
    ended = []
    for stream in streams:
        if not stream.finished:
            message = (
                "the connection to the control host was lost (network or worker gateway); "
                "the request was ended and may be retried"
            )
            stream.close(lost_reason(UNREACHABLE_CAUSE, message))
            stream.lost_cause = UNREACHABLE_CAUSE
            ended.append(stream)
    return ended


def suspect_streams(streams: Iterable[ResponseStream], *, now: float, process: str) -> int:
    """``process`` (on the output path) restarted: every unfinished stream that was
    producing may have lost its next rows with it; mark them (see
    :func:`end_idle_streams`). Returns how many."""
    marked = 0
    for stream in streams:
        if not stream.finished and stream.rows:
            stream.suspect = (now, process)
            marked += 1
    return marked


def end_idle_streams(
    streams: Iterable[ResponseStream],
    *,
    now: float,
    idle_timeout_s: float,
    paused: bool,
    grace_s: float,
) -> list[ResponseStream]:
    """End every unfinished stream idle past ``idle_timeout_s``, and every suspect one
    (:func:`suspect_streams`) that got no row within ``grace_s`` of the restart; return
    them.

    While ``paused``, every clock restarts at ``now`` instead, so the bounds count only
    time spent unpaused.
    """
    ended: list[ResponseStream] = []
    for stream in streams:
        if stream.finished:
            continue
        suspect = stream.suspect
        if paused:
            stream.updated_at = now
            if suspect is not None:
                stream.suspect = (now, suspect[1])
        elif suspect is not None and stream.updated_at > suspect[0]:
            stream.suspect = None  # a row came after the restart: the path works
        elif suspect is not None and now - suspect[0] > grace_s:
            message = (
                f"{suspect[1]} restarted and no output came for {grace_s:g} s after: the "
                "rows it held for this request were lost; the request was ended"
            )
            stream.close(lost_reason(ROWS_LOST_CAUSE, message))
            stream.lost_cause = ROWS_LOST_CAUSE
            ended.append(stream)
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
    grace_s: float,
) -> None:
    """Run :func:`end_idle_streams` over a link's open streams a few times per bound,
    forever (the link cancels it), counting what it ends as ``lost_requests``. Each ended
    stream is aborted in the engine as its handler leaves it."""
    interval = min(1.0, idle_timeout_s / 4, grace_s / 4)
    while True:
        await asyncio.sleep(interval)
        ended = end_idle_streams(
            streams.values(),
            now=time.monotonic(),
            idle_timeout_s=idle_timeout_s,
            paused=session.paused,
            grace_s=grace_s,
        )
        for stream in ended:
            counters.add("lost_requests", stream.lost_cause or IDLE_CAUSE)
