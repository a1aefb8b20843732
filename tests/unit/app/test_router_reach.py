"""Whether the admin app reaches the router: the pure record of it, and the poller telling
every ``/api/events`` subscriber when the router stops and starts again answering."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec

from app.errors import ApiException
from app.events import EventHub
from app.models import Status, Worker
from app.poller import EventPoller
from app.router_reach import RouterReach
from app.views import status_of
from router_core.control.replies import RouterStatus
from tests.unit.app.routers.test_events_route import STATUS_REPLY

WAIT_S = 10.0


class TestRouterReach:
    def test_only_changes_are_news(self) -> None:
        """The first failure and the first answer after failures are news; repeats are
        not; since is when the first read of the new state was sent."""
        reach = RouterReach()
        assert reach.answered(10.0) is False  # the first answer: nobody saw otherwise
        assert (reach.reachable, reach.since) == (True, 10.0)
        assert reach.failed(20.0, "timeout") is True
        assert reach.failed(21.0, "still nothing") is False
        assert (reach.reachable, reach.since, reach.error) == (False, 20.0, "still nothing")
        event = reach.event()
        assert (event.reachable, event.since, event.error) == (False, 20.0, "still nothing")
        assert reach.answered(30.0) is True and reach.answered(31.0) is False
        assert reach.event().model_dump() == {"reachable": True, "since": 30.0, "error": None}

    def test_the_refusal_says_since_when_and_why(self) -> None:
        """A client refused a view is told since when (UTC) and the latest error."""
        reach = RouterReach()
        assert reach.refusal() == "no view of the router yet"
        reach.failed(0.0, "the router did not answer: no reply within 5 s")
        assert reach.refusal() == (
            "the router does not answer the admin app (since 1970-01-01T00:00:00+00:00): "
            "the router did not answer: no reply within 5 s"
        )


class FakeRouter:
    """The two reads the poller makes, answered or failing at will."""

    def __init__(self) -> None:
        self.answers = True
        self.view = status_of(msgspec.convert(STATUS_REPLY, RouterStatus), None, "1")

    def _check(self) -> None:
        if not self.answers:
            raise ApiException(503, "router_unavailable", "the router did not answer: gone")

    async def workers(self) -> list[Worker]:
        self._check()
        return []

    async def status(self) -> Status:
        self._check()
        return self.view


async def next_event(queue: Any) -> tuple[str, dict[str, Any]]:
    """The next event of a subscription (keep-alives skipped)."""
    while True:
        frame = await queue.next(WAIT_S)
        assert frame is not None, "the stream ended"
        if frame.startswith(b"event: "):
            head, data = frame.decode().strip().split("\n")
            return head.removeprefix("event: "), json.loads(data.removeprefix("data: "))


class TestPollerAnnounces:
    def test_router_events_when_it_stops_and_starts_answering(self) -> None:
        """A live stream gets ``router`` reachable false (since, error) when the reads fail
        and reachable true when they are answered again; nothing in between."""

        async def scenario() -> None:
            router = FakeRouter()
            hub = EventHub(16)
            poller = EventPoller(router, hub, 0.01)  # type: ignore[arg-type]
            task = asyncio.create_task(poller.run())
            try:
                assert await hub.wait_view(WAIT_S) is not None
                opened = hub.subscribe()
                assert opened is not None
                _, stream = opened
                router.answers = False
                kind, payload = await asyncio.wait_for(next_event(stream), WAIT_S)
                assert kind == "router" and payload["reachable"] is False, payload
                assert payload["error"] == "the router did not answer: gone"
                assert payload["since"] > 0 and poller.router_answers is False
                router.answers = True
                kind, payload = await asyncio.wait_for(next_event(stream), WAIT_S)
                assert (kind, payload["reachable"], payload["error"]) == ("router", True, None)
            finally:
                task.cancel()

        asyncio.run(scenario())


class TimesOutAsCancelled(FakeRouter):
    """A read whose deadline passes just as the poller is cancelled: the cancellation
    reaches the read, which ends with the timeout's ApiException instead."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = asyncio.Event()

    async def workers(self) -> list[Worker]:
        self.reading.set()
        try:
            await asyncio.sleep(WAIT_S)
        except asyncio.CancelledError:
            raise ApiException(504, "timeout", "no reply in time") from None
        return []

    async def status(self) -> Status:
        await asyncio.sleep(WAIT_S)
        return self.view


class TestPollerStops:
    def test_a_cancel_that_lands_as_a_read_times_out_still_stops_it(self) -> None:
        """The read ends with its own error, not the cancel: the poller stops all the same
        (with asyncio.gather it went on polling, and the admin app's shutdown waited for
        it without end)."""

        async def scenario() -> None:
            router = TimesOutAsCancelled()
            poller = EventPoller(router, EventHub(16), 0.01)  # type: ignore[arg-type]
            task = asyncio.create_task(poller.run())
            await asyncio.wait_for(router.reading.wait(), WAIT_S)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=WAIT_S)
            assert done, "the poller went on after it was cancelled"
            assert task.cancelled()

        asyncio.run(scenario())
