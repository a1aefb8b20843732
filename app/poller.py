"""The one task that reads the router for ``/api/events``: every poll interval, the workers
(departed included), the status and the engine's load, handed to the :class:`EventHub`.

A mutation wakes it at once (:meth:`EventPoller.wake`), so its effect reaches the
console without waiting out the interval. A router that does not answer is logged once
when it goes and once when it comes back, and each of those is a ``router`` event to
every subscriber (:mod:`app.router_reach`); the loop goes on until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from app.errors import ApiException
from app.events import EventHub, StackView, sse_frame
from app.router_api import RouterApi
from app.router_reach import RouterReach
from app.task_groups import both

__all__ = ["EventPoller"]

logger = logging.getLogger("switchboard.admin.poller")


class EventPoller:
    """Polls ``router`` every ``interval_s`` and feeds ``hub``; run it as a task."""

    def __init__(self, router: RouterApi, hub: EventHub, interval_s: float) -> None:
        self.router = router
        self.hub = hub
        self.interval_s = interval_s
        #: Whether, since when and why not the router answers the polls.
        self.reach = RouterReach()
        self._wake = asyncio.Event()

    @property
    def router_answers(self) -> bool | None:
        """Whether the latest poll got its answers (None before the first poll)."""
        return self.reach.reachable

    def _failed(self, sent_at: float, error: str) -> None:
        if self.reach.failed(sent_at, error):
            logger.warning("cannot read the router for events: %s", error)
            self.hub.publish(sse_frame("router", self.reach.event()))

    def wake(self) -> None:
        """Poll now instead of at the next interval (a mutation just changed something)."""
        self._wake.set()

    async def poll_once(self) -> StackView:
        """Read the router once; ApiException if it does not answer. Cancelled meanwhile,
        it raises CancelledError, never a read's error, so :meth:`run` stops
        (:func:`app.task_groups.both`)."""
        workers, status = await both(self.router.workers(), self.router.status())
        return StackView(workers={worker.id: worker for worker in workers}, status=status)

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            started, sent_at = time.monotonic(), time.time()
            self._wake.clear()
            try:
                view = await self.poll_once()
            except ApiException as exc:
                self._failed(sent_at, exc.message)
            except Exception as exc:  # a view the API's models refuse (version skew): go on
                if self.reach.reachable is not False:
                    logger.exception("cannot make sense of the router's answer")
                self._failed(sent_at, f"an answer the admin app cannot read ({exc!r})")
            else:
                if self.reach.answered(sent_at):
                    logger.info("the router answers again")
                    self.hub.publish(sse_frame("router", self.reach.event()))
                self.hub.update(view)
            remaining = self.interval_s - (time.monotonic() - started)
            if remaining > 0:
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation that
                # comes as the wait ends (a mutation's wake during shutdown), and then
                # this loop outlives the lifespan that cancelled it.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
