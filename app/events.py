"""Server-sent events: what changed between two polls, and fanning it out to subscribers.

:func:`stack_events` is pure: given the stack as the poller saw it last time and now, it
returns the events to send (``worker``, ``pause``, ``load``). :class:`EventHub` keeps the
latest view, serves each new subscriber a ``snapshot`` of it, and hands every event to
every subscriber through the subscriber's own bounded queue. A subscriber whose queue
is full is dropped (its stream ends; a client reconnects and gets a fresh snapshot) and
counted: one slow reader never holds up the poller or the others. At most
``max_subscribers`` listen at once: beyond, :meth:`EventHub.subscribe` raises
:class:`SubscribersFull` (counted; the route answers 503), so open streams cannot grow
the hub's queues without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel

from app.models import Load, LoadEvent, PauseEvent, Snapshot, Status, Worker, WorkerEvent

__all__ = [
    "DEFAULT_MAX_SUBSCRIBERS",
    "KEEPALIVE",
    "EventHub",
    "StackView",
    "SubscribersFull",
    "Subscription",
    "load_changed",
    "sse_frame",
    "stack_events",
    "status_changed",
    "worker_events",
]

logger = logging.getLogger("switchboard.admin.events")

#: The comment line sent when a stream has been quiet for ``keepalive_s``.
KEEPALIVE = b": keep-alive\n\n"
#: Event streams open at once at most, unless the hub is told otherwise.
DEFAULT_MAX_SUBSCRIBERS = 256

#: Clock jitter in the router's derived Unix times (rounded to ms, recomputed per reply).
_TIME_SLACK_S = 0.05
#: Fields whose changes alone do not make a ``worker`` event.
_VOLATILE = {"last_heartbeat_s_ago", "registered_at", "last_heartbeat_at"}


def sse_frame(kind: str, data: BaseModel) -> bytes:
    """One event as it goes on the wire: ``event: kind``, ``data: <json>``, blank line."""
    return b"event: " + kind.encode() + b"\ndata: " + data.model_dump_json().encode() + b"\n\n"


@dataclass(frozen=True)
class StackView:
    """The stack as one poll saw it: workers by id (router order) and the status."""

    workers: dict[str, Worker]
    status: Status

    @property
    def load(self) -> Load | None:
        return self.status.engine.load

    def snapshot(self) -> Snapshot:
        return Snapshot(workers=list(self.workers.values()), status=self.status)


def _worker_changed(before: Worker, after: Worker) -> bool:
    if before.model_dump(exclude=_VOLATILE) != after.model_dump(exclude=_VOLATILE):
        return True
    # A heartbeat moves last_heartbeat_at by an interval; the clock jitter by a millisecond.
    return abs(after.last_heartbeat_at - before.last_heartbeat_at) > _TIME_SLACK_S


def worker_events(before: Mapping[str, Worker], after: Mapping[str, Worker]) -> list[WorkerEvent]:
    """One event per worker whose view changed: ``registered`` (new id), ``departed`` (now
    dead, or gone from the router's list), ``state`` (another state) or ``updated``."""
    events = []
    for worker_id, worker in after.items():
        old = before.get(worker_id)
        if old is None:
            if worker.state == "dead":
                events.append(WorkerEvent(change="departed", worker=worker))
            else:
                events.append(WorkerEvent(change="registered", worker=worker))
        elif old.state != worker.state:
            if worker.state == "dead":
                events.append(WorkerEvent(change="departed", worker=worker))
            elif old.state == "dead":
                events.append(WorkerEvent(change="registered", worker=worker))
            else:
                events.append(WorkerEvent(change="state", worker=worker))
        elif _worker_changed(old, worker):
            events.append(WorkerEvent(change="updated", worker=worker))
    for worker_id, old in before.items():
        if worker_id not in after and old.state != "dead":
            gone = old.model_copy(update={"state": "dead", "inflight": 0, "safe_to_delete": True})
            events.append(WorkerEvent(change="departed", worker=gone))
    return events


def status_changed(before: Status, after: Status) -> bool:
    """Whether a ``pause`` event is due: pause state, its mode or start, the recent
    operations, or the engine's liveness changed."""
    return (
        before.paused != after.paused
        or before.pause_mode != after.pause_mode
        or before.pause_state_since != after.pause_state_since
        or [op.op_id for op in before.recent_operations]
        != [op.op_id for op in after.recent_operations]
        or before.engine.live != after.engine.live
    )


#: Load fields that change with every report, busy or idle.
_LOAD_CLOCKS = {"taken_ns", "age_s"}


def load_changed(before: Load | None, after: Load | None) -> bool:
    """Whether a ``load`` event is due: running, waiting, capacity, token usage or the
    engine's step changed (a fresh report of the same load does not count)."""
    if after is None:
        return False
    if before is None:
        return True
    return before.model_dump(exclude=_LOAD_CLOCKS) != after.model_dump(exclude=_LOAD_CLOCKS)


def stack_events(before: StackView | None, after: StackView) -> list[bytes]:
    """The frames to send after a poll that saw ``after`` (``before``: the previous poll)."""
    if before is None:
        return []  # New subscribers get a snapshot; nobody has seen an earlier view.
    frames = [sse_frame("worker", event) for event in worker_events(before.workers, after.workers)]
    if status_changed(before.status, after.status):
        frames.append(sse_frame("pause", PauseEvent(status=after.status)))
    if after.load is not None and load_changed(before.load, after.load):
        frames.append(sse_frame("load", LoadEvent(load=after.load)))
    return frames


class Subscription:
    """One ``/api/events`` client: a bounded queue of frames, ended by ``None``."""

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize)
        self.maxsize = maxsize
        self.ended = False

    def offer(self, frame: bytes) -> bool:
        """Queue ``frame``; False when the queue is full (the subscriber is too slow)."""
        try:
            self._queue.put_nowait(frame)
        except asyncio.QueueFull:
            return False
        return True

    def end(self) -> None:
        """End the stream: what is queued is discarded, the reader gets ``None`` next."""
        self.ended = True
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    def waiting(self) -> list[bytes]:
        """Every frame queued now, taken without waiting (none once the stream ended):
        the writer sends them in one write instead of one each."""
        frames: list[bytes] = []
        while not self._queue.empty():
            frame = self._queue.get_nowait()
            if frame is None:  # the end: leave it for next()
                self._queue.put_nowait(None)
                break
            frames.append(frame)
        return frames

    async def next(self, keepalive_s: float) -> bytes | None:
        """The next frame, :data:`KEEPALIVE` after ``keepalive_s`` of quiet, None at the end."""
        try:
            # asyncio.timeout, not wait_for, which on 3.11 can swallow a cancellation.
            async with asyncio.timeout(keepalive_s):
                return await self._queue.get()
        except TimeoutError:
            return None if self.ended else KEEPALIVE


class SubscribersFull(Exception):
    """:meth:`EventHub.subscribe` refused: ``limit`` subscribers already listen."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} event streams are open, the most this app serves")
        self.limit = limit


@dataclass
class EventHub:
    """The latest stack view and everyone listening for changes to it (at most
    ``max_subscribers`` at once)."""

    queue_size: int
    max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS
    view: StackView | None = None
    #: Subscribers dropped because their queue was full.
    dropped_subscribers: int = 0
    #: Subscriptions refused because ``max_subscribers`` already listened.
    refused_subscribers: int = 0
    closed: bool = False
    _subscribers: set[Subscription] = field(default_factory=set)
    _first_view: asyncio.Event = field(default_factory=asyncio.Event)
    #: Whether the latest subscribe was refused (the refusals are logged when they start).
    _refusing: bool = False

    def __post_init__(self) -> None:
        if self.queue_size < 1 or self.max_subscribers < 1:
            raise ValueError("queue_size and max_subscribers must be >= 1")

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    async def wait_view(self, timeout_s: float) -> StackView | None:
        """The latest view, waiting up to ``timeout_s`` for the first poll."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._first_view.wait()
        return self.view

    def update(self, view: StackView) -> None:
        """Take a new poll's view and send the events it implies."""
        frames = stack_events(self.view, view)
        self.view = view
        self._first_view.set()
        for frame in frames:
            self.publish(frame)

    def publish(self, frame: bytes) -> None:
        """Queue ``frame`` for every subscriber; drop those that cannot take it."""
        for subscription in list(self._subscribers):
            if not subscription.offer(frame):
                self._subscribers.discard(subscription)
                subscription.end()
                self.dropped_subscribers += 1
                logger.warning(
                    "dropped a slow /api/events subscriber (%d queued events unread; %d dropped "
                    "so far)",
                    subscription.maxsize,
                    self.dropped_subscribers,
                )

    def subscribe(self) -> tuple[bytes, Subscription] | None:
        """A snapshot frame of the latest view and a subscription to what follows it;
        None before the first poll or once the hub is closed; :class:`SubscribersFull`
        (counted in ``refused_subscribers``) when ``max_subscribers`` already listen."""
        if self.view is None or self.closed:
            return None
        if len(self._subscribers) >= self.max_subscribers:
            self.refused_subscribers += 1
            if not self._refusing:  # once per run of refusals: a client retrying is no news
                logger.warning(
                    "refusing /api/events subscribers: %d streams are open (max_subscribers)",
                    self.max_subscribers,
                )
            self._refusing = True
            raise SubscribersFull(self.max_subscribers)
        self._refusing = False
        # Room for two polls in which every worker changed (each heartbeat is an update):
        # with a thousand workers one poll alone could outgrow queue_size, and every
        # subscriber was dropped at its first poll.
        subscription = Subscription(self.queue_size + 2 * len(self.view.workers))
        self._subscribers.add(subscription)
        return sse_frame("snapshot", self.view.snapshot()), subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    def close(self) -> None:
        """End every stream (the server is stopping); refuse new subscribers."""
        self.closed = True
        for subscription in list(self._subscribers):
            subscription.end()
        self._subscribers.clear()
