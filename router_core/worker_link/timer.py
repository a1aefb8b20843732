"""The worker's registration and heartbeat timer, one asyncio task per link (no sockets:
it sends through the callable it is given).

Until the router accepts the worker, the timer sends registrations, the first retry after
50 ms (the router is usually just starting too), backing off to ``register_retry_s``.
Once registered it heartbeats at the interval the router named, and at once whenever the
reported state changes (:meth:`RegistrationTimer.state_may_have_changed`); if the router
forgets the worker (a refused reply), it registers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Final

from router_core.wire.codec import Frames
from router_core.worker_link.outcomes import CONTROL_DROPPED, REGISTRATION_UNSENT, Count
from router_core.worker_link.session import WorkerSession

__all__ = ["FIRST_REGISTER_RETRY_S", "RegistrationTimer", "wait_event"]

#: The first registration retry; later ones back off to ``settings.register_retry_s``.
FIRST_REGISTER_RETRY_S: Final = 0.05

#: Sends one control message, counting ``unsent`` if the router cannot take it now.
ControlSender = Callable[[Frames, Count], object]


class RegistrationTimer:
    """Registers ``session`` until accepted, then heartbeats, through ``send_control``."""

    def __init__(
        self, session: WorkerSession, send_control: ControlSender, *, register_retry_s: float
    ) -> None:
        self._session = session
        self._send_control = send_control
        self._register_retry_s = register_retry_s
        self._state_changed = asyncio.Event()
        #: The state the last heartbeat reported (``""`` before the first).
        self.reported_state = ""

    def state_may_have_changed(self) -> None:
        """Heartbeat at once if the state differs from the one last reported (e.g.
        ``draining`` -> ``drained``); nothing while not registered."""
        session = self._session
        if session.registered and session.state != self.reported_state:
            self._state_changed.set()

    async def run(self) -> None:
        """Register and heartbeat until cancelled (the cancellation always propagates)."""
        session = self._session
        next_beat = 0.0
        retry = FIRST_REGISTER_RETRY_S
        while True:
            now = time.monotonic()
            if not session.registered:
                self._send_control(session.registration(), REGISTRATION_UNSENT)
                wait = retry
                retry = min(retry * 2, self._register_retry_s)
            else:
                retry = FIRST_REGISTER_RETRY_S
                if now >= next_beat or session.state != self.reported_state:
                    self.reported_state = session.state
                    self._send_control(session.heartbeat(), CONTROL_DROPPED)
                    next_beat = now + session.heartbeat_interval_s
                wait = max(0.0, next_beat - now)
            self._state_changed.clear()
            await wait_event(self._state_changed, wait)


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``event`` for up to ``timeout_s``.

    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` can swallow a
    cancellation that arrives as the event is set, and a cancelled task would run on.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
