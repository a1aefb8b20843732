"""Tests for WorkerLink against a fake router made of real sockets: close never hangs and
aborts what is still in flight; admission waits and refusals."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import zmq

from router_core.endpoints import RouterEndpoints
from router_core.transport import bind, close_bound
from router_core.wire import Kind, decode_header, decode_payload
from router_core.wire.codec import frame_message
from router_core.wire.control import (
    DrainCommand,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
)
from router_core.wire.requests import AbortRequest, GenerateRequest
from router_core.worker_link import AdmissionRefused, WorkerIdentity, WorkerLink, WorkerLinkSettings


class FakeRouter:
    """The router's two PULLs and a PUSH to the worker, driven by the test."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> None:
        endpoints = RouterEndpoints.in_run_dir(run_dir)
        self.endpoints = endpoints
        self.requests = bind(context, zmq.PULL, endpoints.requests)
        self.workers = bind(context, zmq.PULL, endpoints.workers)
        self.context = context
        self.to_worker: zmq.Socket[bytes] | None = None

    def receive(self, sock: zmq.Socket[bytes], kind: Kind, timeout_s: float = 5.0) -> object:
        """The payload of the next message of ``kind`` on ``sock`` (others skipped)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sock.poll(50):
                frames = sock.recv_multipart()
                header = decode_header(frames[0])
                if header.kind is kind:
                    return decode_payload(kind, frames[1])
        raise AssertionError(f"no {kind.name} within {timeout_s} s")

    def send(self, address: str, kind: Kind, payload: object) -> None:
        if self.to_worker is None:
            self.to_worker = self.context.socket(zmq.PUSH)
            self.to_worker.setsockopt(zmq.LINGER, 0)
            self.to_worker.connect(address)
        self.to_worker.send_multipart(frame_message(kind, payload))  # type: ignore[arg-type]

    def close(self) -> None:
        close_bound(self.requests, self.endpoints.requests)
        close_bound(self.workers, self.endpoints.workers)
        if self.to_worker is not None:
            self.to_worker.close()


@pytest.fixture
def router(context: zmq.Context[zmq.Socket[bytes]], run_dir: Path):  # type: ignore[no-untyped-def]
    fake = FakeRouter(context, run_dir)
    yield fake
    fake.close()


def make_link(run_dir: Path, **limits: float) -> WorkerLink:
    settings = WorkerLinkSettings.in_run_dir(run_dir, "w0", **limits)
    identity = WorkerIdentity(
        "w0", settings.address, pid=os.getpid(), host="", version="", started_ns=0
    )
    return WorkerLink(settings, identity)


async def registered(link: WorkerLink, router: FakeRouter) -> None:
    """Open ``link`` and accept its registration."""
    await link.open()
    await asyncio.to_thread(router.receive, router.workers, Kind.REGISTER)
    router.send(link.settings.address, Kind.REGISTER_REPLY, RegistrationReply("w0", True))
    async with asyncio.timeout(5):
        while not link.session.registered:
            await asyncio.sleep(0.01)


class TestClose:
    def test_close_aborts_unfinished_streams_and_deregisters(
        self, router: FakeRouter, run_dir: Path
    ) -> None:
        """A request still in flight at close is aborted in the engine, its stream ends
        with an abort row, the worker deregisters, and close returns promptly."""

        async def scenario() -> tuple[object, object]:
            link = make_link(run_dir)
            await registered(link, router)
            with link.open_stream("r1") as stream:
                request = GenerateRequest(rid="r1", input_ids=[1, 2])
                await link.send_request(Kind.GENERATE, request)
                async with asyncio.timeout(5):
                    await link.close()
                row = await stream.next_row()
                assert stream.finished
            return row, link.inflight

        row, inflight = asyncio.run(scenario())
        assert row.finished_reasons[0]["type"] == "abort"  # type: ignore[attr-defined]
        assert inflight == 0
        router.receive(router.requests, Kind.GENERATE)
        abort = router.receive(router.requests, Kind.ABORT)
        assert isinstance(abort, AbortRequest) and abort.rid == "r1"
        assert abort.reason == "shutdown"
        router.receive(router.workers, Kind.DEREGISTER)

    def test_close_right_after_a_state_change_does_not_hang(
        self, router: FakeRouter, run_dir: Path
    ) -> None:
        """The timer task is cancelled even when its event was just set (a 3.11 wait_for
        would swallow the cancellation)."""

        async def scenario() -> None:
            for _ in range(5):
                link = make_link(run_dir)
                await registered(link, router)
                with link.open_stream("r"):
                    pass  # leaving the stream reports a state change
                async with asyncio.timeout(5):
                    await link.close()

        asyncio.run(scenario())


class TestEngineRestart:
    def test_requests_sent_to_a_restarted_engine_end_as_aborted(
        self, router: FakeRouter, run_dir: Path
    ) -> None:
        """A load snapshot from a new engine incarnation ends the requests the old one
        had with an abort; a request sent to the new one carries on."""

        async def scenario() -> tuple[object, bool]:
            link = make_link(run_dir)
            await registered(link, router)
            address = link.settings.address
            router.send(address, Kind.LOAD, LoadSnapshot(taken_ns=1, engine_started_ns=100))
            async with asyncio.timeout(5):
                while link.session.engine_incarnation != 100:
                    await asyncio.sleep(0.01)
            with link.open_stream("old") as old:
                await link.send_request(Kind.GENERATE, GenerateRequest(rid="old", input_ids=[1]))
                router.send(address, Kind.LOAD, LoadSnapshot(taken_ns=2, engine_started_ns=200))
                async with asyncio.timeout(5):
                    row = await old.next_row()
                with link.open_stream("new") as new:
                    request = GenerateRequest(rid="new", input_ids=[1])
                    await link.send_request(Kind.GENERATE, request)
                    router.send(address, Kind.LOAD, LoadSnapshot(taken_ns=3, engine_started_ns=200))
                    await asyncio.sleep(0.2)
                    survived = not new.finished
            await link.close()
            return row, survived

        row, survived = asyncio.run(scenario())
        assert row.finished_reasons[0]["type"] == "abort"  # type: ignore[attr-defined]
        assert "restarted" in row.finished_reasons[0]["message"]  # type: ignore[attr-defined]
        assert survived


class TestAdmission:
    def test_paused_waits_and_drain_admits_and_is_heard(
        self, router: FakeRouter, run_dir: Path
    ) -> None:
        """A paused worker makes new requests wait until continue; a draining one admits
        what its held connections still bring, and ``on_draining`` hears the drain start
        and end."""

        async def scenario() -> None:
            link = make_link(run_dir)
            await registered(link, router)
            address = link.settings.address
            router.send(
                address, Kind.PAUSE_BROADCAST, PauseContinueBroadcast("n-1", True, "in_place")
            )
            async with asyncio.timeout(5):
                while not link.session.paused:
                    await asyncio.sleep(0.01)
            waiting = asyncio.ensure_future(link.wait_admission())
            await asyncio.sleep(0.2)
            assert not waiting.done()
            router.send(address, Kind.PAUSE_BROADCAST, PauseContinueBroadcast("n-2", False))
            async with asyncio.timeout(5):
                await waiting
            heard: list[bool] = []
            link.on_draining = heard.append
            router.send(address, Kind.DRAIN, DrainCommand("w0", True))
            async with asyncio.timeout(5):
                while not link.session.draining:
                    await asyncio.sleep(0.01)
            async with asyncio.timeout(1):
                await link.wait_admission()
            router.send(address, Kind.DRAIN, DrainCommand("w0", False))
            async with asyncio.timeout(5):
                while link.session.draining:
                    await asyncio.sleep(0.01)
            assert heard == [True, False]
            await link.close()

        asyncio.run(scenario())
        router.receive(router.workers, Kind.ACK)

    def test_not_registered_is_refused_after_the_wait(self, run_dir: Path) -> None:
        """With no router answering, admission gives up after register_wait_s."""

        async def scenario() -> None:
            link = make_link(run_dir, register_wait_s=0.2)
            await link.open()
            started = time.monotonic()
            with pytest.raises(AdmissionRefused, match="not_registered"):
                await link.wait_admission()
            assert time.monotonic() - started < 2.0
            await link.close()

        asyncio.run(scenario())
