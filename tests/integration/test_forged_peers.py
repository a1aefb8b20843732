"""Forged control messages against a real ``switchboard up``: each finding of issue 12's
peer authentication is reproduced by a forger that does not have the stack key (as a
local process of another user would not: it never reads ``stack.key``, and it is never
given a worker's registration secret), and each forgery is refused, counted under
``switchboard_rejected_frames_total{process="tokenizer_router"}`` with its reason, and
leaves the stack as it was: pauses answer 200 with both real workers, streams in flight
end exactly, no process restarts.

Where the unit tests show a keyless router accepting the same message, the first test
here shows it against the real stack: the forger's registration, sent again with the
key, is accepted and does make a pause time out.

One stack for the module (``tests/fault/harness/stack.py``), about 40 s in all.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import zmq

from router_core.credentials import KEY_FILE, read_key
from router_core.endpoints import RouterEndpoints, worker_address
from router_core.wire import Kind, frame_message
from router_core.wire.codec import Frames
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    Heartbeat,
    LoadSnapshot,
    RegistrationReply,
    UpstreamIncarnation,
    WorkerRegistration,
)
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.load import Load
from tests.fault.harness.metrics import rejected
from tests.fault.harness.stack import FaultStack, fault_stack
from tests.support.eventually import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: The router's reasons, as /metrics labels them.
ROUTER = "tokenizer_router"


class Forger:
    """A process without the key: PUSHes to the router's sockets, a PULL of its own."""

    def __init__(self, run_dir: Path, inbox_dir: Path) -> None:
        self.endpoints = RouterEndpoints.in_run_dir(run_dir)
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.address = f"ipc://{inbox_dir}/forger"
        self.inbox = self.context.socket(zmq.PULL)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.bind(self.address)
        self._pushes: dict[str, zmq.Socket[bytes]] = {}

    def send(self, endpoint: str, frames: Frames) -> None:
        sock = self._pushes.get(endpoint)
        if sock is None:
            sock = self._pushes[endpoint] = self.context.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 1000)
            sock.connect(endpoint)
        sock.send_multipart(frames)

    def to_workers(self, kind: Kind, payload: msgspec.Struct) -> None:
        """One message to the router's workers socket."""
        self.send(self.endpoints.workers, frame_message(kind, payload))

    def to_engine_events(self, kind: Kind, payload: msgspec.Struct) -> None:
        """One message to the router's engine-events socket."""
        self.send(self.endpoints.engine_events, frame_message(kind, payload))

    def reply(self, timeout_ms: int = 5000) -> RegistrationReply:
        """The next registration reply at the forger's own address."""
        assert self.inbox.poll(timeout_ms), "no reply at the forger's address"
        _, payload = self.inbox.recv_multipart()
        return msgspec.msgpack.decode(payload, type=RegistrationReply)

    def close(self) -> None:
        for sock in self._pushes.values():
            sock.close()
        self.inbox.close()
        self.context.term()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    """One ``switchboard up`` (2 workers, 2 detokenizers) for every test here."""
    with fault_stack(tmp_path_factory.mktemp("forged-peers")) as running:
        yield running


@pytest.fixture
def forger(stack: FaultStack) -> Iterator[Forger]:
    """A forger with its own inbox outside the run directory."""
    inbox_dir = Path(tempfile.mkdtemp(prefix="forger-", dir="/tmp"))
    made = Forger(stack.run_dir, inbox_dir)
    yield made
    made.close()
    for leftover in inbox_dir.iterdir():
        leftover.unlink()
    inbox_dir.rmdir()


def refused(stack: FaultStack) -> Counter[str]:
    """The tokenizer router's rejects by reason, from /metrics."""
    with stack.admin() as admin:
        response = admin.get("/metrics")
        response.raise_for_status()
    return Counter(
        {reason: n for (process, reason), n in rejected(response.text).items() if process == ROUTER}
    )


def wait_refused(stack: FaultStack, reason: str, at_least: int, before: Counter[str]) -> int:
    """Wait until ``reason`` grew by ``at_least`` since ``before``; how much it grew."""
    wait_until(
        lambda: refused(stack)[reason] - before[reason] >= at_least,
        10.0,
        f"{at_least} more rejected{{{reason}}}",
    )
    return refused(stack)[reason] - before[reason]


def workers(stack: FaultStack) -> dict[str, str]:
    """Worker id -> state of every worker the admin API lists (``dead``: departed)."""
    with stack.admin() as admin:
        listed = admin.get("/api/workers").json()["workers"]
    return {worker["id"]: worker["state"] for worker in listed}


def registered(stack: FaultStack) -> dict[str, str]:
    """The same, for workers still registered."""
    return {worker: state for worker, state in workers(stack).items() if state != "dead"}


def barrier(stack: FaultStack, action: str, **body: Any) -> httpx.Response:
    with stack.admin(timeout=30.0) as admin:
        return admin.post(f"/api/{action}", json=body)


def next_op_id(stack: FaultStack) -> str:
    """The id the router's next pause or continue gets (``<incarnation>-<seq + 1>``)."""
    with stack.admin() as admin:
        recent = admin.get("/api/status").json()["recent_operations"]
    if not recent:  # an honest continue first, so that an id is known
        assert barrier(stack, "continue", timeout_s=5.0).status_code == 200
        return next_op_id(stack)
    incarnation, _, seq = recent[-1]["op_id"].rpartition("-")
    return f"{incarnation}-{int(seq) + 1}"


def assert_unaffected(stack: FaultStack, pids: dict[str, int]) -> None:
    """Same processes, both workers serving, and a pause and continue answer 200."""
    assert stack.roles() == pids, "a process restarted"
    wait_until(
        lambda: registered(stack) == {"w0": "serving", "w1": "serving"},
        10.0,
        lambda: f"w0 and w1 serving, and no one else: {workers(stack)}",
    )
    paused = barrier(stack, "pause", mode="abort", timeout_s=5.0)
    assert paused.status_code == 200, paused.text
    assert sorted(paused.json()["acked"]) == ["engine", "w0", "w1"]
    assert barrier(stack, "continue", timeout_s=5.0).status_code == 200


class Stopped:
    """``role`` SIGSTOPped for the ``with`` block, SIGCONTed after it whatever happens."""

    def __init__(self, stack: FaultStack, role: str) -> None:
        self.pid = stack.pid(role)

    def __enter__(self) -> Stopped:
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        os.kill(self.pid, signal.SIGCONT)


def test_a_fake_worker_is_refused_and_pauses_answer_200(stack: FaultStack, forger: Forger) -> None:
    """A registration without the key is refused (bad_key, and the forger is told so);
    the pause answers 200 with the two real workers. The same registration with the key
    is accepted and does make a pause time out: the key is what stops it."""
    pids, before = stack.roles(), refused(stack)
    forger.to_workers(Kind.REGISTER, WorkerRegistration("fake", forger.address))
    answer = forger.reply()
    assert (answer.accepted, answer.reason) == (False, "bad_key")
    assert wait_refused(stack, "bad_key", 1, before) == 1
    assert "fake" not in workers(stack)  # not even as departed: never registered
    assert_unaffected(stack, pids)

    key = read_key(stack.run_dir / KEY_FILE)  # an insider, for the contrast only
    forger.to_workers(Kind.REGISTER, WorkerRegistration("fake", forger.address, key=key))
    secret = forger.reply().secret
    try:
        timed_out = barrier(stack, "pause", mode="abort", timeout_s=0.5)
        assert timed_out.status_code == 504 and timed_out.json()["stragglers"] == ["fake"]
        assert barrier(stack, "continue", timeout_s=0.5).status_code == 504
    finally:
        forger.to_workers(Kind.DEREGISTER, Deregistration("fake", secret=secret))
    wait_until(lambda: "fake" not in registered(stack), 5.0, "fake deregistered")
    assert_unaffected(stack, pids)


def test_forged_heartbeats_neither_keep_a_stalled_worker_nor_drain_another(
    stack: FaultStack, forger: Forger
) -> None:
    """While w1 is stopped, heartbeats in its name without its secret are refused
    (bad_secret): it is declared dead at the timeout as if no one spoke for it, and comes
    back when continued. A forged 'drained' heartbeat and a forged deregistration for w0
    change nothing."""
    pids, before = stack.roles(), refused(stack)
    w1_address = worker_address(stack.run_dir, "w1")

    def counted() -> int:
        grown = refused(stack)
        return sum(grown[r] - before[r] for r in ("bad_secret", "unknown_worker"))

    forger.to_workers(Kind.HEARTBEAT, Heartbeat("w0", state="drained", inflight=0))
    forger.to_workers(Kind.DEREGISTER, Deregistration("w0"))
    with Stopped(stack, "worker-w1"):
        started, forged = time.monotonic(), 0
        while "w1" in registered(stack) and time.monotonic() - started < 15.0:
            forger.to_workers(Kind.HEARTBEAT, Heartbeat("w1", state="serving", address=w1_address))
            forged += 1
            time.sleep(0.1)
        declared_dead_s = time.monotonic() - started
        assert workers(stack)["w1"] == "dead", "forged heartbeats kept the stopped w1 alive"
        assert workers(stack)["w0"] == "serving"
        # Refused while w1 was registered (bad_secret); the last one or two, after its
        # death, are a stranger's, asked to register again (unknown_worker).
        wait_until(lambda: counted() == forged + 2, 10.0, lambda: f"{forged + 2}: {counted()}")
        assert refused(stack)["bad_secret"] - before["bad_secret"] >= forged
    print(f"w1 declared dead after {declared_dead_s:.1f} s despite {forged} forged heartbeats")
    assert_unaffected(stack, pids)


def test_a_forged_ack_does_not_complete_a_pause(stack: FaultStack, forger: Forger) -> None:
    """With w1 stopped, acks in its name without its secret are refused (bad_secret):
    the pause answers 504 naming w1, not 200 complete."""
    pids, before = stack.roles(), refused(stack)
    op_id = next_op_id(stack)
    with Stopped(stack, "worker-w1"):

        async def pause_while_forging() -> httpx.Response:
            async with stack.async_admin(timeout=30.0) as admin:
                call = asyncio.create_task(
                    admin.post("/api/pause", json={"mode": "abort", "timeout_s": 1.5})
                )
                while not call.done():
                    forger.to_workers(Kind.ACK, Acknowledgement(op_id, "w1"))
                    await asyncio.sleep(0.05)
                return await call

        answer = asyncio.run(pause_while_forging())
        assert answer.status_code == 504, answer.text
        assert answer.json()["op_id"] == op_id and answer.json()["stragglers"] == ["w1"]
        assert wait_refused(stack, "bad_secret", 1, before) >= 1
    assert barrier(stack, "continue", timeout_s=5.0).status_code == 200
    assert_unaffected(stack, pids)


def run_streams_while(stack: FaultStack, label: str, forge: Any) -> list[Any]:
    """40 streaming requests, 8 at a time, with ``forge()`` called every 50 ms while they
    run; every request's record."""

    async def run() -> list[Any]:
        plan = RequestPlan.build(label, size=40, min_tokens=48, max_tokens=96)
        async with Load(stack.base_url, plan, label=label) as load:
            load.closed(8)
            while load.issued < 40:
                forge()
                await asyncio.sleep(0.05)
            await load.stop()
        return load.records

    return asyncio.run(run())


def test_a_forged_load_snapshot_aborts_no_stream(stack: FaultStack, forger: Forger) -> None:
    """Snapshots of a new engine incarnation sent without the key while streams run are
    refused (bad_engine_key): every stream ends exactly, none as engine_restarted."""
    pids, before = stack.roles(), refused(stack)
    sent = 0

    def forge() -> None:
        nonlocal sent
        sent += 1
        snapshot = LoadSnapshot(running=0, engine_started_ns=time.time_ns(), taken_ns=2**62)
        forger.to_engine_events(Kind.LOAD, snapshot)

    records = run_streams_while(stack, "forged-load", forge)
    assert [r.describe() for r in records if r.outcome is not Outcome.OK] == []
    assert wait_refused(stack, "bad_engine_key", sent, before) == sent
    assert "the engine restarted" not in stack.log()
    assert_unaffected(stack, pids)


def test_forged_beacons_make_no_worker_suspect_its_streams(
    stack: FaultStack, forger: Forger
) -> None:
    """Beacons of new detokenizer incarnations sent without the key while streams run are
    refused (bad_upstream_key): no worker hears of a restart, every stream ends exactly."""
    pids, before = stack.roles(), refused(stack)
    sent = 0

    def forge() -> None:
        nonlocal sent
        for process in ("detokenizer-router", "detokenizer-0", "detokenizer-1"):
            sent += 1
            forger.to_workers(Kind.UPSTREAM, UpstreamIncarnation(process, time.time_ns() * 2))

    records = run_streams_while(stack, "forged-beacon", forge)
    assert [r.describe() for r in records if r.outcome is not Outcome.OK] == []
    suspected = re.findall(r"worker link: '?[\w-]+'? restarted; \d+ requests", stack.log())
    assert suspected == [], "a worker took a forged beacon for a restart"
    assert wait_refused(stack, "bad_upstream_key", sent, before) == sent
    assert_unaffected(stack, pids)


def test_a_worker_id_with_a_newline_forges_no_log_line(stack: FaultStack, forger: Forger) -> None:
    """A registration whose worker id holds a newline (even with the key) is refused
    (bad_worker_id); the log shows the id escaped on one line, and no line begins with
    the text after the newline."""
    pids, before = stack.roles(), refused(stack)
    forged_line = "2026-01-01 00:00:00,000 INFO audit pause result=ok"
    key = read_key(stack.run_dir / KEY_FILE)
    for with_key in ("", key):
        registration = WorkerRegistration(f"w9\n{forged_line}", forger.address, key=with_key)
        forger.to_workers(Kind.REGISTER, registration)
    assert wait_refused(stack, "bad_worker_id", 2, before) == 2
    assert not [line for line in stack.log().splitlines() if line.startswith(forged_line)]
    assert "'w9\\n2026-01-01" in stack.log()
    assert_unaffected(stack, pids)
