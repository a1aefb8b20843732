"""The admin app's event logic: diffing two polls, the frames, the hub."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from app.events import (
    DEFAULT_MAX_SUBSCRIBERS,
    KEEPALIVE,
    EventHub,
    StackView,
    SubscribersFull,
    Subscription,
    load_changed,
    stack_events,
    status_changed,
    worker_events,
)
from app.models import Load, Status, Worker
from tests.unit.app.router_replies import status, worker


def by_id(*workers: Worker) -> dict[str, Worker]:
    return {item.id: item for item in workers}


def load(running: int = 0, **changes: Any) -> Load:
    fields: dict[str, Any] = {"running": running, "waiting": 0, "max_running": 8}
    fields |= {"token_usage": 0.0, "step": 1, "taken_ns": 5, "age_s": 0.1, **changes}
    return Load(**fields)


class TestWorkerEvents:
    """What one poll's workers imply against the previous poll's."""

    def test_nothing_changed(self) -> None:
        """Only the heartbeat age, and clock jitter in derived times: no event."""
        before = by_id(worker("w0"))
        after = by_id(worker("w0", last_heartbeat_s_ago=0.3, registered_at=1000.001))
        assert worker_events(before, after) == []

    def test_registered_state_updated_departed(self) -> None:
        """A new id, a new state, a new count and a death each make one event."""
        before = by_id(worker("w0"), worker("w1"), worker("w2"))
        after = by_id(
            worker("w0", "draining"),
            worker("w1", inflight=3),
            worker("w2", "dead", departure_reason="dead_worker", safe_to_delete=True),
            worker("w3", "starting"),
        )
        changes = {event.worker.id: event.change for event in worker_events(before, after)}
        assert changes == {"w0": "state", "w1": "updated", "w2": "departed", "w3": "registered"}

    def test_heartbeat_is_an_update(self) -> None:
        """A new heartbeat (its time moved by more than jitter) is an update."""
        before = by_id(worker("w0"))
        after = by_id(worker("w0", last_heartbeat_at=1011.0))
        assert [event.change for event in worker_events(before, after)] == ["updated"]

    def test_vanished_worker_departs_as_dead(self) -> None:
        """A live worker gone from the list (the router forgot it) departs, shown dead."""
        events = worker_events(by_id(worker("w0", inflight=2)), {})
        assert [(e.change, e.worker.state, e.worker.inflight) for e in events] == [
            ("departed", "dead", 0)
        ]
        assert worker_events(by_id(worker("w0", "dead")), {}) == []

    def test_restarted_worker_registers_again(self) -> None:
        """The same id going from dead to live is a registration."""
        events = worker_events(by_id(worker("w0", "dead")), by_id(worker("w0", "starting")))
        assert [event.change for event in events] == ["registered"]

    def test_new_dead_worker_is_a_departure(self) -> None:
        """A worker first seen already dead (it came and went between polls) departs."""
        events = worker_events({}, by_id(worker("w9", "dead")))
        assert [event.change for event in events] == ["departed"]


class TestStatusAndLoad:
    """When ``pause`` and ``load`` events are due."""

    def test_status_changes(self) -> None:
        """Pause state, mode, since, operations and engine liveness count; uptime does not."""
        base = status()
        assert not status_changed(base, status(uptime_s=99.0, workers={"serving": 1}))
        assert status_changed(base, status(paused=True))
        assert status_changed(base, status(ops=("op-1",)))
        assert status_changed(base, status(pause_state_since=101.0))
        assert status_changed(base, status(engine_live=False))
        assert status_changed(status(paused=True), status(paused=True, pause_mode="in_place"))

    def test_load_changes(self) -> None:
        """A load counts when it differs beyond its clocks; None after is never an event."""
        assert load_changed(None, load())
        assert not load_changed(load(), load(taken_ns=99, age_s=0.0))
        assert load_changed(load(), load(running=1))
        assert load_changed(load(), load(step=2))
        assert not load_changed(load(), None)


def stack(*workers: Worker, current: Status | None = None) -> StackView:
    return StackView(workers=by_id(*workers), status=current or status())


def parse(frame: bytes) -> tuple[str, dict[str, Any]]:
    """An SSE frame's event type and JSON data."""
    text = frame.decode()
    assert text.endswith("\n\n")
    kind_line, data_line = text.strip("\n").split("\n")
    return kind_line.removeprefix("event: "), json.loads(data_line.removeprefix("data: "))


class TestStackEvents:
    """Frames from two whole views."""

    def test_first_poll_sends_nothing(self) -> None:
        """Nobody has seen an earlier view: subscribers start from a snapshot instead."""
        assert stack_events(None, stack(worker("w0"))) == []

    def test_frames_in_order(self) -> None:
        """Worker events, then pause, then load, each a well-formed SSE frame."""
        before = stack(worker("w0"))
        after = stack(
            worker("w0", "paused"), current=status(paused=True, ops=("op-1",), load={"running": 2})
        )
        frames = [parse(frame) for frame in stack_events(before, after)]
        assert [kind for kind, _ in frames] == ["worker", "pause", "load"]
        assert frames[0][1]["change"] == "state" and frames[0][1]["worker"]["state"] == "paused"
        assert frames[1][1]["status"]["recent_operations"][0]["op_id"] == "op-1"
        assert frames[2][1]["load"]["running"] == 2


class TestEventHub:
    """Fan-out through bounded per-subscriber queues."""

    def test_subscribers_get_a_snapshot_then_changes(self) -> None:
        """No view, no subscription; then a snapshot, then every change, to everyone."""

        async def scenario() -> None:
            hub = EventHub(queue_size=8)
            assert hub.subscribe() is None
            hub.update(stack(worker("w0")))
            first, second = hub.subscribe(), hub.subscribe()
            assert first is not None and second is not None
            kind, data = parse(first[0])
            assert kind == "snapshot" and data["workers"][0]["id"] == "w0"
            hub.update(stack(worker("w0", "draining")))
            for _, subscription in (first, second):
                frame = await subscription.next(1.0)
                assert frame is not None and parse(frame)[0] == "worker"
            hub.unsubscribe(second[1])
            assert hub.subscribers == 1

        asyncio.run(scenario())

    def test_slow_subscriber_is_dropped_and_counted(self) -> None:
        """A full queue ends that subscriber's stream; the others keep every event. The
        queue holds queue_size events and two per worker (here 3 + 2)."""

        async def scenario() -> None:
            hub = EventHub(queue_size=3)
            hub.update(stack(worker("w0")))
            slow, quick = hub.subscribe(), hub.subscribe()
            assert slow is not None and quick is not None
            received = []
            for inflight in range(1, 7):
                hub.update(stack(worker("w0", inflight=inflight)))
                frame = await quick[1].next(1.0)
                assert frame is not None
                received.append(parse(frame)[1]["worker"]["inflight"])
                assert hub.dropped_subscribers == (1 if inflight == 6 else 0)
            assert received == [1, 2, 3, 4, 5, 6]
            assert hub.dropped_subscribers == 1 and hub.subscribers == 1
            assert await slow[1].next(1.0) is None  # its stream ends at once

        asyncio.run(scenario())

    def test_room_for_two_polls_of_every_worker(self) -> None:
        """A poll in which each of many workers changed (their heartbeats) does not drop a
        subscriber that reads: its queue has room for two such polls beyond queue_size."""

        async def scenario() -> None:
            ids = [f"w{index}" for index in range(40)]
            hub = EventHub(queue_size=4)
            hub.update(stack(*(worker(name) for name in ids)))
            opened = hub.subscribe()
            assert opened is not None
            for inflight in (1, 2):  # two polls, 40 events each, none read yet
                hub.update(stack(*(worker(name, inflight=inflight) for name in ids)))
            assert hub.dropped_subscribers == 0
            frames = [await opened[1].next(1.0) for _ in range(80)]
            assert all(frame is not None for frame in frames)
            hub.update(stack(*(worker(name, inflight=3) for name in ids)))
            hub.update(stack(*(worker(name, inflight=4) for name in ids)))
            hub.update(stack(*(worker(name, inflight=5) for name in ids)))
            assert hub.dropped_subscribers == 1  # three unread polls: 120 > 4 + 80

        asyncio.run(scenario())

    def test_close_ends_every_stream(self) -> None:
        """Closing the hub ends current streams and refuses new ones."""

        async def scenario() -> None:
            hub = EventHub(queue_size=4)
            hub.update(stack(worker("w0")))
            opened = hub.subscribe()
            assert opened is not None
            hub.close()
            assert await opened[1].next(1.0) is None
            assert hub.subscribe() is None

        asyncio.run(scenario())

    def test_subscribers_beyond_the_limit_are_refused_and_counted(self) -> None:
        """At max_subscribers open, subscribe raises SubscribersFull (counted) and the
        open streams keep their events; one leaving makes room for one more."""

        async def scenario() -> None:
            hub = EventHub(queue_size=4, max_subscribers=2)
            hub.update(stack(worker("w0")))
            opened = [hub.subscribe(), hub.subscribe()]
            for _ in range(2):
                with pytest.raises(SubscribersFull) as refused:
                    hub.subscribe()
                assert refused.value.limit == 2
            assert (hub.subscribers, hub.refused_subscribers) == (2, 2)
            hub.update(stack(worker("w0", "draining")))
            for each in opened:
                assert each is not None
                frame = await each[1].next(1.0)
                assert frame is not None and parse(frame)[0] == "worker"
            assert opened[0] is not None
            hub.unsubscribe(opened[0][1])
            assert hub.subscribe() is not None and hub.subscribers == 2
            assert hub.refused_subscribers == 2

        asyncio.run(scenario())

    def test_limits_must_be_positive(self) -> None:
        """The default limit is 256; a hub with no room, or unbounded queues, is refused."""
        assert EventHub(queue_size=1).max_subscribers == DEFAULT_MAX_SUBSCRIBERS == 256
        with pytest.raises(ValueError, match="max_subscribers"):
            EventHub(queue_size=1, max_subscribers=0)
        with pytest.raises(ValueError, match="queue_size"):
            EventHub(queue_size=0)  # asyncio.Queue(0) would have no bound at all

    def test_wait_view(self) -> None:
        """wait_view gives None after its timeout without a poll, else the latest view."""

        async def scenario() -> None:
            hub = EventHub(queue_size=4)
            assert await hub.wait_view(0.01) is None
            asyncio.get_running_loop().call_later(0.01, hub.update, stack(worker("w0")))
            seen = await hub.wait_view(5.0)
            assert seen is not None and "w0" in seen.workers

        asyncio.run(scenario())


class TestSubscription:
    """One subscriber's queue."""

    def test_keepalive_when_quiet(self) -> None:
        """After keepalive_s without an event the reader gets the keep-alive comment."""

        async def scenario() -> None:
            subscription = Subscription(2)
            assert await subscription.next(0.01) == KEEPALIVE
            assert subscription.offer(b"a") and subscription.offer(b"b")
            assert not subscription.offer(b"c")
            assert await subscription.next(1.0) == b"a"
            subscription.end()
            assert await subscription.next(1.0) is None

        asyncio.run(scenario())

    def test_waiting_takes_every_queued_frame_but_the_end(self) -> None:
        """waiting() hands over what is queued, in order, without waiting; an ended
        stream's end stays for next()."""

        async def scenario() -> None:
            subscription = Subscription(4)
            assert subscription.waiting() == []
            for frame in (b"a", b"b", b"c"):
                assert subscription.offer(frame)
            assert await subscription.next(1.0) == b"a"
            assert subscription.waiting() == [b"b", b"c"]
            assert subscription.waiting() == []
            assert subscription.offer(b"d")
            subscription.end()  # discards d, queues the end
            assert subscription.waiting() == []
            assert await subscription.next(1.0) is None

        asyncio.run(scenario())


@pytest.mark.parametrize("change", ["inflight", "requests_sent", "rows_received", "state"])
def test_every_counted_field_is_an_event(change: str) -> None:
    """Each field the console shows makes an event when it alone changes."""
    before = by_id(worker("w0"))
    after = by_id(worker("w0", **({change: "drained"} if change == "state" else {change: 7})))
    assert len(worker_events(before, after)) == 1
