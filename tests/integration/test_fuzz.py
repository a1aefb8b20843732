"""Garbage at every socket both routers bind, while real traffic flows through them."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import pytest
import zmq

from router_core.control.protocol import ControlRequest, decode_reply, decode_request, encode
from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.wire import (
    Header,
    Kind,
    WireError,
    decode_header,
    encode_header,
    encode_payload,
    frame_batch,
)
from router_core.wire.codec import frame_message
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    Heartbeat,
    LoadSnapshot,
    WorkerRegistration,
)
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import GenerateRequest
from tests.integration.harness import SocketFactory, Stack, wait_until

pytestmark = pytest.mark.integration

RANDOM_MESSAGES = 10_000
MUTATIONS_PER_TEMPLATE = 12
ROUNDS = 20
REQUESTS = 1500
EMITTED_BATCHES = 600
DETOK_BATCHES = 200


@dataclass
class Target:
    """One bound socket under attack, and the rejections expected from it."""

    name: str
    endpoint: str
    control: bool = False
    messages: list[list[bytes]] = field(default_factory=list)
    expected: Counter[str] = field(default_factory=Counter)

    def add(self, frames: list[bytes], reason: str) -> None:
        self.messages.append(frames)
        self.expected[reason] += 1


def header_reason(frame: bytes) -> str | None:
    """Why a router rejects this header frame, or None if it accepts it."""
    try:
        decode_header(frame)
    except WireError as exc:
        return exc.reason
    return None


def control_reason(frames: list[bytes]) -> str | None:
    """Why a control server rejects what a DEALER sent as ``frames``, or None."""
    if len(frames) > 2 or (len(frames) == 2 and frames[0] != b""):
        return "control_envelope"
    try:
        decode_request(frames[-1])
    except msgspec.DecodeError:
        return "control_request"
    return None


def add_random(rng: random.Random, target: Target, count: int) -> None:
    """``count`` messages of 1..4 random frames of 0..200 bytes that the target rejects."""
    added = 0
    while added < count:
        frames = [rng.randbytes(rng.randint(0, 200)) for _ in range(rng.randint(1, 4))]
        reason = control_reason(frames) if target.control else header_reason(frames[0])
        if reason is None:
            continue  # by chance a valid message: not garbage, draw again
        target.add(frames, reason)
        added += 1


def add_mutations(rng: random.Random, target: Target, templates: list[list[bytes]]) -> None:
    """Truncated and bit-flipped headers of valid messages, payload frames kept."""
    for frames in templates:
        header = frames[0]
        made = 0
        while made < MUTATIONS_PER_TEMPLATE:
            if made % 2 == 0:
                mutated = header[: rng.randint(0, len(header) - 1)]
            else:
                buf = bytearray(header)
                for _ in range(rng.randint(1, 3)):
                    buf[rng.randrange(len(buf))] ^= rng.randint(1, 255)
                mutated = bytes(buf)
            reason = header_reason(mutated)
            if reason is None:
                continue
            target.add([mutated, *frames[1:]], reason)
            made += 1


def str_batch(rids: list[str], owners: list[str]) -> list[bytes]:
    return frame_batch(
        BatchStrOutput(rids=rids, http_worker_ipcs=owners, output_strs=["x"] * len(rids))
    )


def build_attack(stack: Stack, detok_endpoints: DetokenizerRouterEndpoints) -> list[Target]:
    """Every bad message for every bound socket, with the reason each must be counted under."""
    rng = random.Random(20240229)
    ep = stack.endpoints
    requests = Target("requests", ep.requests)
    workers = Target("workers", ep.workers)
    events = Target("engine_events", ep.engine_events)
    outputs = Target("outputs", ep.outputs)
    control = Target("control", ep.control, control=True)
    inbound = Target("detok_inbound", detok_endpoints.inbound)
    detok_control = Target("detok_control", detok_endpoints.control, control=True)
    targets = [requests, workers, events, outputs, control, inbound, detok_control]
    share, extra = divmod(RANDOM_MESSAGES, len(targets))
    for index, target in enumerate(targets):
        add_random(rng, target, share + (index < extra))

    ghost = f"ipc://{stack.run_dir}/worker-ghost"
    generate = frame_message(
        Kind.GENERATE, GenerateRequest(rid="g", input_ids=[1]), rids=["g"], reply_to=[ghost]
    )
    heartbeat = frame_message(Kind.HEARTBEAT, Heartbeat(worker_id="ghost"))
    batch = str_batch(["a", "b"], [ghost, ghost])
    load = frame_message(Kind.LOAD, LoadSnapshot(step=1))
    ack = frame_message(Kind.ACK, Acknowledgement(op_id="x-1", participant="ghost"))
    idle = frame_message(Kind.IDLE, None)
    garbage = b"\xc1not msgpack"
    too_many = [idle[0], *([b"x"] * 4097)]

    add_mutations(rng, requests, [generate, heartbeat])
    add_mutations(rng, workers, [generate, heartbeat, batch])
    add_mutations(rng, events, [load, ack])
    add_mutations(rng, outputs, [batch, idle])
    add_mutations(rng, inbound, [batch, idle])
    mismatched = encode_header(Header(Kind.STR_BATCH, ["a", "b"], [ghost]))
    two_rids = encode_header(Header(Kind.GENERATE, ["a", "b"], [ghost, ghost]))
    for data_target in (requests, workers, events, outputs, inbound):
        data_target.add([mismatched, batch[1], batch[2]], "header_shape")
        data_target.add([two_rids, generate[1]], "header_shape")
        data_target.add(too_many, "too_many_frames")
        data_target.add([batch[0], batch[1]], "frame_count")  # 2 rows, 1 row frame
        data_target.add([*batch, batch[1]], "frame_count")  # 2 rows, 3 row frames
        data_target.add([idle[0], b"payload"], "frame_count")
    for forward_target in (requests, workers):
        forward_target.add([generate[0]], "frame_count")
        forward_target.add([*generate, generate[1]], "frame_count")
        forward_target.add(batch, "unexpected_kind")
        forward_target.add(idle, "unexpected_kind")
    requests.add(heartbeat, "unexpected_kind")
    requests.add(ack, "unexpected_kind")
    workers.add(generate, "unexpected_kind")  # requests have their own socket now
    workers.add(load, "unexpected_kind")
    workers.add([heartbeat[0], garbage], "bad_payload")
    workers.add(
        [
            frame_message(Kind.REGISTER, WorkerRegistration("a", "b"))[0],
            encode_payload(LoadSnapshot()),
        ],
        "bad_payload",
    )
    workers.add(heartbeat, "unknown_worker")  # no address: counted, nobody to answer
    workers.add(frame_message(Kind.DEREGISTER, Deregistration("ghost")), "unknown_worker")
    events.add([load[0]], "frame_count")
    events.add([load[0], garbage], "bad_payload")
    events.add([ack[0], garbage], "bad_payload")
    events.add(generate, "unexpected_kind")
    events.add(batch, "unexpected_kind")
    outputs.add(generate, "unexpected_kind")
    outputs.add(heartbeat, "unexpected_kind")
    inbound.add(generate, "unexpected_kind")
    inbound.add(load, "unexpected_kind")
    for control_target in (control, detok_control):
        # With the key, so that they are refused past the key check.
        unknown = ControlRequest(id=1, command="no_such", key=stack.key)
        control_target.add([encode(unknown)], "unknown_command")
        bad_args = ControlRequest(id=2, command="status", args={"x": 1}, key=stack.key)
        control_target.add([encode(bad_args)], "control_arguments")
        control_target.add([msgspec.msgpack.encode({"id": "one"})], "control_request")
    for target in targets:
        rng.shuffle(target.messages)
    return targets


def more_rows(before: int, report: dict[str, Any]) -> bool:
    """New outputs since ``before``, or all of them already."""
    return bool(report["rows"] > before or report["rows"] >= REQUESTS + EMITTED_BATCHES)


class TestFuzz:
    def test_garbage_everywhere_is_counted_and_traffic_survives(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """~10,000 random messages plus truncated, bit-flipped, mis-counted, mis-routed and
        undecodable ones at all seven bound sockets of both routers, while a worker's
        requests and the engine's outputs flow: every real message arrives, both routers
        stay up, every bad control request is answered with an error, and each router's
        ``rejected`` counters equal, reason by reason, what was sent."""
        detok_endpoints = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 2)
        detokenizers = [sockets.bound(zmq.PULL, e) for e in detok_endpoints.detokenizers]
        router = stack.start_router()
        detok = stack.start_detok_router(2)
        worker = stack.start_worker(
            "w0",
            "--requests",
            str(REQUESTS),
            "--request-rate",
            str(REQUESTS / 4),
            "--requests-after-load",
        )
        engine = stack.start_engine(
            "--answer-generate",
            "--emit-to",
            worker.address,
            "--emit-rate",
            str(EMITTED_BATCHES / 4),
            "--emit-batches",
            str(EMITTED_BATCHES),
        )
        router_pid = router.ctl("status")["pid"]
        detok_pid = detok.ctl("status")["pid"]
        targets = build_attack(stack, detok_endpoints)
        senders = {
            t.name: sockets.connected(zmq.DEALER if t.control else zmq.PUSH, t.endpoint)
            for t in targets
        }
        replies: Counter[str] = Counter()
        error_replies: Counter[str] = Counter()

        def collect_replies() -> None:
            for target in targets:
                sock = senders[target.name]
                while target.control and sock.poll(0):
                    frames = sock.recv_multipart()
                    replies[target.name] += 1
                    reply = decode_reply(frames[-1])
                    error_replies[target.name] += not reply.ok

        detok_rows_sent = 0
        inbound = sockets.connected(zmq.PUSH, detok_endpoints.inbound)
        for round_index in range(ROUNDS):
            rows_before = worker.report()["rows"]
            for target in targets:
                share = target.messages[round_index::ROUNDS]
                for frames in share:
                    senders[target.name].send_multipart(frames)
            for b in range(round_index, DETOK_BATCHES, ROUNDS):
                rids = [f"d{b}-{j}" for j in range(3)]
                owners = [f"ipc://{stack.run_dir}/worker-d{j}" for j in range(3)]
                inbound.send_multipart(
                    frame_batch(
                        BatchTokenIDOutput(rids=rids, http_worker_ipcs=owners, output_ids=[[b]] * 3)
                    )
                )
                detok_rows_sent += 3
            collect_replies()
            # Interleave with real traffic: the next round waits for new outputs.
            worker.wait_for(partial(more_rows, rows_before), 10.0, "outputs flowing")

        expected_total = REQUESTS + EMITTED_BATCHES
        report = worker.wait_for(
            lambda r: r["rows"] >= expected_total, 30.0, "every answer and output"
        )
        assert report["finished"] == REQUESTS and report["requests_sent"] == REQUESTS
        assert report["rows"] == expected_total
        assert report["misdelivered"] == 0 and report["bad_rows"] == 0
        assert report["bad_messages"] == 0
        engine.wait_for(
            lambda r: r["received"].get("GENERATE") == REQUESTS, 5.0, "every GENERATE counted"
        )

        detok_rows = Counter[int]()

        def detok_rows_arrived() -> bool:
            for index, sock in enumerate(detokenizers):
                while sock.poll(0):
                    detok_rows[index] += len(sock.recv_multipart()) - 1
            return sum(detok_rows.values()) >= detok_rows_sent

        wait_until(detok_rows_arrived, 10.0, "rows through the detokenizer router", 0.005)
        assert sum(detok_rows.values()) == detok_rows_sent

        by_name = {t.name: t for t in targets}
        router_names = ("requests", "workers", "engine_events", "outputs", "control")
        router_expected = sum((by_name[n].expected for n in router_names), Counter())
        detok_expected = by_name["detok_inbound"].expected + by_name["detok_control"].expected

        def rejected(handle: Any) -> dict[str, int]:
            return dict(handle.ctl("status")["counters"].get("rejected", {}))

        wait_until(
            lambda: sum(rejected(router).values()) >= router_expected.total(),
            15.0,
            lambda: f"router rejects {rejected(router)} to reach {dict(router_expected)}",
        )
        wait_until(
            lambda: sum(rejected(detok).values()) >= detok_expected.total(),
            15.0,
            lambda: f"detok rejects {rejected(detok)} to reach {dict(detok_expected)}",
        )

        def all_replies() -> bool:
            collect_replies()
            return all(replies[t.name] >= len(t.messages) for t in targets if t.control)

        wait_until(all_replies, 10.0, lambda: f"error replies, have {dict(replies)}")
        for target in targets:
            if target.control:
                assert replies[target.name] == len(target.messages)
                assert error_replies[target.name] == len(target.messages)

        assert sum(len(t.messages) for t in targets) >= RANDOM_MESSAGES
        assert rejected(router) == dict(router_expected)
        assert rejected(detok) == dict(detok_expected)
        status = router.ctl("status")
        assert status["pid"] == router_pid and status["workers"] == {"serving": 1}
        assert "control_reply" not in status["counters"].get("dropped", {})
        assert detok.ctl("status")["pid"] == detok_pid
        router.process.assert_running()
        detok.process.assert_running()
