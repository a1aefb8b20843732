"""The worker registry through a real router: registration, drain, deregistration,
liveness after a router restart, and what the router refuses."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import msgspec
import pytest
import zmq

from router_core.wire import Kind, decode_header, decode_payload, frame_batch, frame_message
from router_core.wire.control import (
    Acknowledgement,
    Heartbeat,
    RegistrationReply,
    WorkerRegistration,
    WorkerReportedState,
)
from router_core.wire.outputs import BatchStrOutput
from tests.integration.harness import SocketFactory, Stack, wait_until

pytestmark = pytest.mark.integration


def register(worker_id: str, address: str, key: str) -> list[bytes]:
    return frame_message(Kind.REGISTER, WorkerRegistration(worker_id, address, key=key))


def ack(op_id: str, participant: str) -> list[bytes]:
    return frame_message(Kind.ACK, Acknowledgement(op_id=op_id, participant=participant))


class TestDrain:
    def test_drain_waits_for_inflight_then_safe_to_delete_and_undrain_resumes(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Drain moves a worker with requests in flight to draining (not safe to delete);
        once its last request finishes it is drained and safe_to_delete; undrain makes it
        serving again — in the worker's own report and in list_workers."""
        router = stack.start_router()
        engine = stack.start_engine(wait_live=router)
        worker = stack.start_worker("w0", "--requests", "3")
        engine.wait_for(lambda r: r["received"].get("GENERATE") == 3, 10.0, "3 GENERATE")
        worker.wait_for(lambda r: r["inflight"] == 3, 5.0, "3 requests in flight")

        def listed() -> dict[str, Any]:
            views: list[dict[str, Any]] = router.ctl("list_workers")
            (view,) = views
            return view

        view = router.ctl("drain", worker_id="w0")
        assert view["state"] == "draining" and view["id"] == "w0"
        worker.wait_for(lambda r: r["state"] == "draining", 5.0, "draining")
        wait_until(lambda: listed()["inflight"] == 3, 5.0, "router to see 3 in flight")
        assert listed()["state"] == "draining"
        assert listed()["safe_to_delete"] is False

        finished = BatchStrOutput(
            rids=[f"w0-req-{i}" for i in range(3)],
            http_worker_ipcs=[worker.address] * 3,
            output_strs=["done"] * 3,
            finished_reasons=[{"type": "stop"}] * 3,
        )
        sockets.connected(zmq.PUSH, router.endpoints.outputs).send_multipart(frame_batch(finished))
        report = worker.wait_for(lambda r: r["state"] == "drained", 5.0, "drained")
        assert report["finished"] == 3 and report["inflight"] == 0
        wait_until(lambda: listed()["safe_to_delete"], 5.0, "safe_to_delete in list_workers")
        assert listed()["state"] == "drained"

        view = router.ctl("undrain", worker_id="w0")
        assert view["state"] == "serving"
        report = worker.wait_for(lambda r: r["state"] == "serving", 5.0, "serving again")
        assert report["drain_commands"] == 2
        wait_until(lambda: listed()["state"] == "serving", 5.0, "serving in list_workers")
        assert listed()["safe_to_delete"] is False

    def test_a_heartbeat_crossing_the_drain_command_does_not_lose_the_drain(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """A worker whose last pre-drain heartbeat ('serving') reaches the router after the
        drain command, and which then reports 'drained', is listed drained and
        safe_to_delete."""
        router = stack.start_router()
        address = f"ipc://{stack.run_dir}/worker-raw"
        inbox = sockets.bound(zmq.PULL, address)
        push = sockets.connected(zmq.PUSH, router.endpoints.workers)
        push.send_multipart(register("raw", address, stack.key))
        header, payload = inbox.recv_multipart()
        assert decode_header(header).kind is Kind.REGISTER_REPLY
        secret = msgspec.msgpack.decode(payload, type=RegistrationReply).secret
        assert router.ctl("drain", worker_id="raw")["state"] == "draining"
        states: tuple[WorkerReportedState, ...] = ("serving", "drained")
        for state in states:
            beat = Heartbeat(worker_id="raw", state=state, address=address, secret=secret)
            push.send_multipart(frame_message(Kind.HEARTBEAT, beat))
        with contextlib.suppress(AssertionError):
            wait_until(
                lambda: router.ctl("get_worker", worker_id="raw")["heartbeats"] == 2,
                3.0,
                "both heartbeats",
            )
        view = router.ctl("get_worker", worker_id="raw")
        assert view["heartbeats"] == 2
        assert view["state"] == "drained" and view["safe_to_delete"] is True, view

    def test_registering_again_keeps_a_drain(self, stack: Stack, sockets: SocketFactory) -> None:
        """A draining worker that registers again (same id and address) stays draining."""
        router = stack.start_router()
        address = f"ipc://{stack.run_dir}/worker-raw"
        inbox = sockets.bound(zmq.PULL, address)
        push = sockets.connected(zmq.PUSH, router.endpoints.workers)
        push.send_multipart(register("raw", address, stack.key))
        assert decode_header(inbox.recv_multipart()[0]).kind is Kind.REGISTER_REPLY
        assert router.ctl("drain", worker_id="raw")["state"] == "draining"
        push.send_multipart(register("raw", address, stack.key))
        kinds = [decode_header(inbox.recv_multipart()[0]).kind for _ in range(2)]
        assert sorted(kinds) == sorted([Kind.DRAIN, Kind.REGISTER_REPLY])
        view = router.ctl("get_worker", worker_id="raw")
        assert view["state"] == "draining"
        assert router.ctl("status")["counters"]["registrations"] == {"accepted": 2}


class TestRegistry:
    def test_registering_twice_makes_one_worker(self, stack: Stack) -> None:
        """A worker that registers twice is listed once, and both registrations are answered."""
        router = stack.start_router()
        stack.start_worker("w1")
        twice = stack.start_worker("w0", "--extra-registrations", "1")
        report = twice.wait_for(lambda r: r["reg_replies"] >= 2, 5.0, "two replies")
        assert report["reg_accepted"] == 2 and report["reg_sent"] == 2
        listed = router.ctl("list_workers")
        assert sorted(v["id"] for v in listed) == ["w0", "w1"]
        status = router.ctl("status")
        assert status["workers"] == {"serving": 2}
        assert status["counters"]["registrations"] == {"accepted": 3}

    def test_sigterm_deregisters_a_worker_at_once(self, stack: Stack) -> None:
        """SIGTERM makes a worker deregister and exit 0; the router forgets it right away
        (as a deregistration, not a heartbeat expiry) and its socket file is gone."""
        router = stack.start_router()
        stack.start_worker("w0")
        leaving = stack.start_worker("w1")
        assert leaving.process.terminate(timeout=5.0) == 0
        wait_until(
            lambda: [v["id"] for v in router.ctl("list_workers")] == ["w0"],
            1.0,  # well inside the 1.5 s heartbeat timeout
            "w1 to leave list_workers",
        )
        counters = router.ctl("status")["counters"]
        assert counters["deregistrations"] == {"shutdown": 1}
        assert "dead_workers" not in counters
        assert not stack.run_dir.joinpath("worker-w1").exists()

    def test_bad_registrations_and_impersonated_acks_are_rejected_once_each(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Registrations with an unusable or remote address or a reserved id, and
        acknowledgements in someone else's name, are each rejected under one reason;
        nobody is registered and the router keeps running."""
        router = stack.start_router()
        workers = sockets.connected(zmq.PUSH, router.endpoints.workers)
        events = sockets.connected(zmq.PUSH, router.endpoints.engine_events)
        good = f"ipc://{stack.run_dir}/worker-x"
        key = stack.key
        sent: list[tuple[zmq.Socket[bytes], list[bytes], str]] = [
            (workers, register("x", "bogus://x", key), "bad_address"),
            (workers, register("x", "tcp://192.0.2.1:5555", key), "bad_address"),
            (workers, register("x", "tcp://127.0.0.1:notaport", key), "bad_address"),
            (workers, register("x", router.endpoints.engine, key), "bad_address"),
            (workers, register("x", router.endpoints.requests, key), "bad_address"),
            (workers, register("engine", good, key), "bad_worker_id"),
            (workers, register("", good, key), "bad_worker_id"),
            (workers, register("x\nforged", good, key), "bad_worker_id"),
            (workers, register("x", good, ""), "bad_key"),
            (workers, ack("op-1", "engine"), "ack_impersonation"),
            (events, ack("op-1", "w0"), "ack_impersonation"),
        ]
        for sock, frames, _ in sent:
            sock.send_multipart(frames)
        expected = Counter(reason for _, _, reason in sent)

        def rejected() -> dict[str, int]:
            return dict(router.ctl("status")["counters"].get("rejected", {}))

        wait_until(
            lambda: sum(rejected().values()) >= len(sent), 5.0, lambda: f"rejects {rejected()}"
        )
        assert router.ctl("list_workers") == []
        assert rejected() == dict(expected), "each bad message must be counted exactly once"

    def test_unknown_heartbeat_with_a_bad_address_is_rejected_once(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """A heartbeat from an unknown worker whose address is unusable is rejected once
        (the rejected total grows by exactly 1) and gets no reply."""
        router = stack.start_router()
        workers = sockets.connected(zmq.PUSH, router.endpoints.workers)
        beat = Heartbeat("ghost", address="not-an-endpoint")
        workers.send_multipart(frame_message(Kind.HEARTBEAT, beat))

        def rejected() -> dict[str, int]:
            return dict(router.ctl("status")["counters"].get("rejected", {}))

        wait_until(lambda: sum(rejected().values()) >= 1, 5.0, "the heartbeat counted")
        assert rejected() == {"bad_address": 1}

    def test_load_snapshots_reach_router_and_workers_live(self, stack: Stack) -> None:
        """The engine's load snapshots are kept by the router (``load``) and forwarded to
        every worker, each newer than the last."""
        router = stack.start_router()
        worker = stack.start_worker("w0")
        stack.start_engine(wait_live=router)
        first = worker.wait_for(lambda r: r["last_load"] is not None, 5.0, "a load snapshot")
        step = first["last_load"]["step"]
        worker.wait_for(lambda r: r["last_load"]["step"] >= step + 3, 5.0, "newer snapshots")
        load = router.ctl("load")
        assert load["max_running"] == 256 and load["step"] >= step
        assert 0 <= load["age_s"] < 1.0

    def test_a_restarted_router_gets_its_workers_back(self, stack: Stack) -> None:
        """After the router restarts, a worker it does not know is told to register again
        (accepted=False in reply to a heartbeat), does so, and is listed again."""
        router = stack.start_router()
        worker = stack.start_worker("w0")
        assert router.process.terminate(timeout=5.0) == 0
        restarted = stack.start_router(name="router-restarted")
        report = worker.wait_for(lambda r: r["reg_rejected"] >= 1, 5.0, "told to register")
        assert report["reg_accepted"] >= 1
        worker.wait_for(lambda r: r["reg_accepted"] >= 2, 5.0, "registered again")
        wait_until(
            lambda: [v["id"] for v in restarted.ctl("list_workers")] == ["w0"],
            3.0,
            "w0 listed by the restarted router",
        )

    def test_every_unknown_heartbeat_gets_a_register_again_reply(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Each heartbeat from a worker the router does not know (20 of them, each with its
        own return address) is answered with RegistrationReply(accepted=False)."""
        router = stack.start_router()
        addresses = [f"ipc://{stack.run_dir}/worker-ghost{i}" for i in range(20)]
        inboxes = [sockets.bound(zmq.PULL, address) for address in addresses]
        push = sockets.connected(zmq.PUSH, router.endpoints.workers)
        for i, address in enumerate(addresses):
            beat = Heartbeat(worker_id=f"ghost{i}", address=address)
            push.send_multipart(frame_message(Kind.HEARTBEAT, beat))
        wait_until(
            lambda: (
                router.ctl("status")["counters"].get("rejected", {}).get("unknown_worker") == 20
            ),
            5.0,
            "20 unknown heartbeats",
        )
        answered: list[bool] = []

        def all_answered() -> bool:
            for inbox in inboxes:
                while inbox.poll(0):
                    frames = inbox.recv_multipart()
                    reply: Any = decode_payload(Kind.REGISTER_REPLY, frames[1])
                    answered.append(reply.accepted is False)
            return len(answered) >= 20

        wait_until(
            all_answered,
            3.0,
            lambda: f"{len(answered)} of 20 answered; {router.ctl('status')['counters']}",
        )
        assert answered.count(True) == 20, answered
