"""Tests for the worker link's sockets against real sockets: the one send-and-count path
(what is counted when a message leaves and when it cannot), the inbox reader (messages
validated, handled, a failing handler counted), and opening and closing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.endpoints import RouterEndpoints
from router_core.transport import FrameLike, bind, close_bound
from router_core.wire import Header, Kind, frame_message
from router_core.wire.control import FreezeGC
from router_core.worker_link import WorkerLinkSettings
from router_core.worker_link.dispatch import worker_frame_count
from router_core.worker_link.outcomes import ABORT_DROPPED, CONTROL_DROPPED
from router_core.worker_link.sockets import LinkSockets
from tests.support.eventually import eventually

WAIT_S = 5.0
FREEZE = frame_message(Kind.FREEZE_GC, FreezeGC())


class Inbox:
    """What the handler under test received, and whether it should fail."""

    def __init__(self) -> None:
        self.kinds: list[Kind] = []
        self.fail_next = False

    def handle(self, header: Header, frames: list[FrameLike]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("handler bug")
        self.kinds.append(header.kind)


class Router:
    """The router's two PULLs, bound by the test."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> None:
        self.endpoints = RouterEndpoints.in_run_dir(run_dir)
        self.requests = bind(context, zmq.PULL, self.endpoints.requests)
        self.workers = bind(context, zmq.PULL, self.endpoints.workers)

    def close(self) -> None:
        close_bound(self.requests, self.endpoints.requests)
        close_bound(self.workers, self.endpoints.workers)


@pytest.fixture
def router(context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> Iterator[Router]:
    """A router that binds its PULLs (and reads only when the test does)."""
    made = Router(context, run_dir)
    yield made
    made.close()


def make(run_dir: Path) -> tuple[LinkSockets, Counters, Inbox]:
    settings = WorkerLinkSettings.in_run_dir(run_dir, "w0")
    counters, inbox = Counters(), Inbox()
    return LinkSockets(settings, counters, inbox.handle, worker_frame_count), counters, inbox


class TestSend:
    def test_a_closed_link_counts_what_it_cannot_send(self, run_dir: Path) -> None:
        """Before open, a send returns False and counts ``unsent``, never ``sent``."""
        sockets, counters, _ = make(run_dir)
        assert not sockets.send("requests", FREEZE, sent=("aborts_sent", "x"), unsent=ABORT_DROPPED)
        assert counters.snapshot() == {"dropped": {"abort": 1}}

    def test_what_leaves_is_counted_as_sent(self, router: Router, run_dir: Path) -> None:
        """Once the router's PULL is connected, the message leaves and ``sent`` counts."""

        async def scenario() -> Counters:
            sockets, counters, _ = make(run_dir)
            sockets.open()
            try:
                await eventually(
                    lambda: sockets.send("requests", FREEZE, sent=("requests_sent", "generate")),
                    WAIT_S,
                    "the router takes a request",
                )
            finally:
                sockets.close()
            return counters

        counters = asyncio.run(scenario())
        assert counters.get("requests_sent", "generate") == 1
        assert router.requests.poll(int(WAIT_S * 1000))
        assert router.requests.recv_multipart() == FREEZE

    def test_what_the_router_cannot_take_is_counted_as_unsent(self, run_dir: Path) -> None:
        """With no router connected, a control message is dropped and counted at once."""

        async def scenario() -> tuple[bool, Counters]:
            sockets, counters, _ = make(run_dir)
            sockets.open()
            try:
                return sockets.send("control", FREEZE, unsent=CONTROL_DROPPED), counters
            finally:
                sockets.close()

        sent, counters = asyncio.run(scenario())
        assert not sent
        assert counters.snapshot() == {"dropped": {"control": 1}}


class TestInbox:
    def test_messages_are_validated_handled_and_failures_counted(
        self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path
    ) -> None:
        """A valid message reaches the handler; a bad one is rejected with its reason; a
        handler that raises is counted and the next message is still handled."""

        async def scenario() -> tuple[list[Kind], Counters]:
            sockets, counters, inbox = make(run_dir)
            sockets.open()
            push = context.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 0)
            push.connect(WorkerLinkSettings.in_run_dir(run_dir, "w0").address)
            try:
                inbox.fail_next = True
                for frames in (FREEZE, [b"\xc1", b"x"], FREEZE):
                    push.send_multipart(frames)
                await eventually(lambda: inbox.kinds, WAIT_S, "a message handled")
            finally:
                push.close(linger=0)
                sockets.close()
            return inbox.kinds, counters

        kinds, counters = asyncio.run(scenario())
        assert kinds == [Kind.FREEZE_GC]
        assert counters.snapshot() == {"rejected": {"handler_error": 1, "bad_header": 1}}


class TestOpenClose:
    def test_close_removes_the_inbox_file_and_is_idempotent(self, run_dir: Path) -> None:
        """Close removes the inbox's ipc file; a second close does nothing."""

        async def scenario() -> None:
            sockets, _, _ = make(run_dir)
            sockets.open()
            assert sockets.is_open()
            with pytest.raises(RuntimeError, match="already open"):
                sockets.open()
            sockets.close()
            sockets.close()
            assert not sockets.is_open()

        asyncio.run(scenario())
        assert not (run_dir / "worker-w0").exists()
        assert list(run_dir.iterdir()) == []

    def test_a_failed_bind_leaves_nothing_open(
        self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path
    ) -> None:
        """An inbox address in use by a live socket fails the open, and it stays closed."""
        address = WorkerLinkSettings.in_run_dir(run_dir, "w0").address
        taken = bind(context, zmq.PULL, address)

        async def scenario() -> bool:
            sockets, _, _ = make(run_dir)
            with pytest.raises(zmq.ZMQError):
                sockets.open()
            return sockets.is_open()

        try:
            assert not asyncio.run(scenario())
        finally:
            close_bound(taken, address)
