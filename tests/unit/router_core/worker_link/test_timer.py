"""Tests for the worker link's registration timer, without sockets: registrations until
accepted (counted apart when they cannot leave), then heartbeats at the router's
interval and at once on a change of state, and a cancellation that always ends it."""

from __future__ import annotations

import asyncio

from router_core.wire import Kind, decode_header, decode_payload
from router_core.wire.codec import Frames
from router_core.wire.control import Heartbeat, RegistrationReply
from router_core.worker_link import WorkerIdentity, WorkerSession
from router_core.worker_link.outcomes import CONTROL_DROPPED, REGISTRATION_UNSENT, Count
from router_core.worker_link.timer import RegistrationTimer
from tests.support.eventually import eventually

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"
WAIT_S = 5.0


class Sent(list[tuple[Kind, Count, object]]):
    """What the timer sent: kind, the count for a failed send, and the payload."""

    def __call__(self, frames: Frames, unsent: Count) -> bool:
        kind = decode_header(frames[0]).kind
        self.append((kind, unsent, decode_payload(kind, frames[1])))
        return True

    def kinds(self) -> list[Kind]:
        return [kind for kind, _, _ in self]


def session() -> WorkerSession:
    identity = WorkerIdentity("w0", ADDRESS, pid=1, host="", version="", started_ns=0)
    return WorkerSession(identity)


class TestRegistrationTimer:
    def test_registers_with_backoff_until_accepted_then_heartbeats(self) -> None:
        """Unregistered: registrations counted apart when unsent; accepted: heartbeats."""

        async def scenario() -> Sent:
            worker, sent = session(), Sent()
            timer = RegistrationTimer(worker, sent, register_retry_s=0.2)
            task = asyncio.create_task(timer.run())
            try:
                await eventually(lambda: len(sent) >= 3, WAIT_S, "three registrations")
                worker.on_registration_reply(
                    RegistrationReply("w0", True, heartbeat_interval_s=0.05)
                )
                count = len(sent)
                await eventually(
                    lambda: sent.kinds()[count:].count(Kind.HEARTBEAT) >= 2,
                    WAIT_S,
                    "two heartbeats at the router's interval",
                )
            finally:
                task.cancel()
                await asyncio.wait([task], timeout=WAIT_S)
            assert task.cancelled()
            return sent

        sent = asyncio.run(scenario())
        registrations = [entry for entry in sent if entry[0] is Kind.REGISTER]
        assert len(registrations) >= 3
        assert all(unsent == REGISTRATION_UNSENT for _, unsent, _ in registrations)
        beats = [entry for entry in sent if entry[0] is Kind.HEARTBEAT]
        assert all(unsent == CONTROL_DROPPED for _, unsent, _ in beats)
        assert sent.kinds()[: len(registrations)] == [Kind.REGISTER] * len(registrations)

    def test_a_change_of_state_heartbeats_at_once(self) -> None:
        """With a long interval, a state change still reports itself without waiting."""

        async def scenario() -> list[str]:
            worker, sent = session(), Sent()
            worker.on_registration_reply(RegistrationReply("w0", True, heartbeat_interval_s=60))
            timer = RegistrationTimer(worker, sent, register_retry_s=1.0)
            task = asyncio.create_task(timer.run())
            try:
                await eventually(lambda: sent.kinds() == [Kind.HEARTBEAT], WAIT_S, "first beat")
                timer.state_may_have_changed()  # nothing changed: no beat
                worker.stopping = True
                timer.state_may_have_changed()
                await eventually(lambda: len(sent) == 2, WAIT_S, "a beat for the new state")
            finally:
                task.cancel()
                await asyncio.wait([task], timeout=WAIT_S)
            return [payload.state for _, _, payload in sent if isinstance(payload, Heartbeat)]

        assert asyncio.run(scenario()) == ["serving", "drained"]
