"""Backward split + fan-out: one producer -> router -> 4 workers, in requests/s.

Switchboard: the producer sends ``frame_batch(batch)`` (column -> row transposition,
one frame per request) to the real router's outputs endpoint; the router regroups the
frames per registered worker and sends each worker one message; each worker decodes
every row. Naive (:mod:`switchboard.bench.naive`): the seed's pickle + field-by-field
copy. Both get the same batches and are timed the same way: rows delivered between the
first arrival at any worker and the last arrival at any worker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import zmq

from router_core.endpoints import RouterEndpoints, worker_address
from router_core.transport import recv_message, send_frames
from router_core.wire import (
    Kind,
    WireError,
    decode_header,
    decode_payload,
    frame_batch,
    frame_message,
    payload_frame_count,
)
from router_core.wire.control import RegistrationReply, WorkerRegistration
from router_core.wire.outputs import BatchStrOutput
from switchboard.bench import naive
from switchboard.bench.batches import SplitPlan
from switchboard.bench.hops import BENCH_HWM, router_losses, serve_router, wait_router_ready
from switchboard.bench.procs import CONTEXT, BenchError, ProcessGroup, Report, trial_dir

__all__ = ["IMPLS", "WORKERS", "SplitImpl", "SplitRun", "measure_split"]

SplitImpl = Literal["naive", "switchboard"]

#: Both implementations, in the order tables list them.
IMPLS: Final[tuple[SplitImpl, ...]] = ("naive", "switchboard")

#: Workers the outputs fan out to.
WORKERS: Final = 4

#: A worker that sees nothing for this long gives up and reports what it has.
IDLE_TIMEOUT_MS: Final = 5000

#: Workers in this benchmark register but never heartbeat; the router must not expire
#: them mid-run (liveness is not what is measured here).
_ROUTER_HEARTBEAT_TIMEOUT_S: Final = 3600.0

#: How often a worker repeats its registration until the router answers.
_REGISTER_RETRY_S: Final = 0.2


@dataclass(frozen=True)
class SplitRun:
    """One trial of one implementation."""

    impl: SplitImpl
    batch_size: int
    logprobs: bool
    sent: int
    delivered: int
    misrouted: int
    counted: int
    seconds: float
    #: The router's own ``dropped``/``rejected`` counters (switchboard only).
    router_losses: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every request arrived at its owner."""
        return self.delivered == self.sent and self.misrouted == 0

    @property
    def rate(self) -> float:
        """Requests per second between the first and the last arrival."""
        if self.seconds <= 0 or self.counted <= 0:
            return 0.0
        return self.counted / self.seconds


def produce_frames(report: Report, entry: str, plan: SplitPlan, done: Event) -> None:
    """Frame and PUSH ``plan.batches`` batches to the router's outputs endpoint."""
    batches = plan.build()
    context = zmq.Context()
    sock = context.socket(zmq.PUSH)
    try:
        sock.setsockopt(zmq.SNDHWM, BENCH_HWM)
        sock.connect(entry)
        for sent in range(plan.batches):
            frames = frame_batch(batches[sent % len(batches)])
            # The project's own send primitive, as a real producer uses it.
            while not send_frames(sock, frames):
                sock.poll(100, zmq.POLLOUT)
        done.wait(60)
    finally:
        sock.close(linger=0)
        context.term()


def _register(
    pull: zmq.Socket[bytes], push: zmq.Socket[bytes], worker_id: str, address: str
) -> None:
    """Register with the router and wait for its accepting REGISTER_REPLY."""
    registration = WorkerRegistration(worker_id=worker_id, address=address, pid=os.getpid())
    message = frame_message(Kind.REGISTER, registration)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        push.send_multipart(message)
        if not pull.poll(int(_REGISTER_RETRY_S * 1000)):
            continue
        frames = pull.recv_multipart()
        header = decode_header(frames[0])
        if header.kind is Kind.REGISTER_REPLY:
            reply = decode_payload(Kind.REGISTER_REPLY, frames[1])
            if isinstance(reply, RegistrationReply) and reply.accepted:
                return
            raise BenchError(f"{worker_id}: registration refused: {reply}")
    raise BenchError(f"{worker_id}: no REGISTER_REPLY from the router")


def receive_rows(
    report: Report,
    router_workers: str,
    address: str,
    expected: int,
    idle_timeout_ms: int,
) -> None:
    """Register as a worker at ``address``, then decode every row until ``expected``.

    Reports ``("result", {"delivered", "misrouted", "first_rows", "first_ns",
    "last_ns"})``; a row counts as delivered if it decodes and names this worker.
    """
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    push = context.socket(zmq.PUSH)
    rows = misrouted = first_rows = first_ns = last_ns = 0
    mine = [address]
    decode_row = msgspec.msgpack.Decoder(BatchStrOutput).decode
    try:
        pull.setsockopt(zmq.RCVHWM, BENCH_HWM)
        pull.bind(address)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(router_workers)
        _register(pull, push, address.rpartition("/")[2], address)
        report.send(("ready", {"pid": os.getpid()}))
        # The project's own receive primitive, as a real worker uses it.
        while rows + misrouted < expected:
            try:
                frames = recv_message(pull)
            except zmq.Again:
                if not pull.poll(idle_timeout_ms):
                    break  # idle: report what arrived; the trial shows as incomplete
                continue
            header = decode_header(frames[0])  # type: ignore[arg-type]
            count = payload_frame_count(header)
            if len(frames) != count + 1:
                raise WireError("frame_count", "frames do not match the header")
            if not first_ns:
                first_ns = time.monotonic_ns()
                first_rows = count
            for frame in frames[1:]:
                if decode_row(frame).http_worker_ipcs == mine:  # type: ignore[arg-type]
                    rows += 1
                else:
                    misrouted += 1
        if rows + misrouted >= expected:
            last_ns = time.monotonic_ns()
        report.send(
            (
                "result",
                {
                    "delivered": rows,
                    "misrouted": misrouted,
                    "first_rows": first_rows,
                    "first_ns": first_ns,
                    "last_ns": last_ns,
                },
            )
        )
    finally:
        pull.close(linger=0)
        push.close(linger=0)
        context.term()


def measure_split(
    impl: SplitImpl,
    batch_size: int,
    requests: int,
    *,
    logprobs: bool = False,
    root: str | Path | None = None,
) -> SplitRun:
    """Run one trial: ``requests`` rows (rounded up to whole batches) to 4 workers."""
    batches = max(1, -(-requests // batch_size))
    with trial_dir(root) as run_dir, ProcessGroup() as group:
        workers = tuple(worker_address(run_dir, f"bench-{i}") for i in range(WORKERS))
        plan = SplitPlan(batch_size, batches, workers, logprobs)
        expected = plan.expected_rows()
        done = CONTEXT.Event()
        if impl == "switchboard":
            group.start("router", serve_router, str(run_dir), _ROUTER_HEARTBEAT_TIMEOUT_S)
            wait_router_ready(run_dir)
            endpoints = RouterEndpoints.in_run_dir(run_dir)
            entry = endpoints.outputs
            receivers = [
                group.start(
                    f"worker-{i}",
                    receive_rows,
                    endpoints.workers,
                    address,
                    expected[address],
                    IDLE_TIMEOUT_MS,
                )
                for i, address in enumerate(workers)
            ]
            producer: Any = produce_frames
        else:
            entry = f"ipc://{run_dir / 'naive-outputs'}"
            group.expect(group.start("naive-router", naive.serve_naive_router, entry), "ready")
            receivers = [
                group.start(
                    f"worker-{i}",
                    naive.receive_objects,
                    address,
                    expected[address],
                    IDLE_TIMEOUT_MS,
                )
                for i, address in enumerate(workers)
            ]
            producer = naive.produce_pickles
        for receiver in receivers:
            group.expect(receiver, "ready")
        group.start("producer", producer, entry, plan, done)
        timeout = 60.0 + plan.requests / 1000
        results = [group.expect(receiver, "result", timeout) for receiver in receivers]
        done.set()
        losses = router_losses(group, run_dir) if impl == "switchboard" else {}
    return _summarize(impl, plan, results, losses)


def _summarize(
    impl: SplitImpl, plan: SplitPlan, results: list[dict[str, Any]], losses: dict[str, int]
) -> SplitRun:
    arrived = [r for r in results if r["first_ns"]]
    delivered = sum(r["delivered"] for r in results)
    misrouted = sum(r["misrouted"] for r in results)
    if not arrived or any(not r["last_ns"] for r in arrived):
        seconds, counted = 0.0, 0
    else:
        earliest = min(arrived, key=lambda r: r["first_ns"])
        seconds = (max(r["last_ns"] for r in arrived) - earliest["first_ns"]) / 1e9
        # The first arrival starts the clock, so its rows are not counted in the rate.
        counted = delivered - earliest["first_rows"]
    return SplitRun(
        impl=impl,
        batch_size=plan.batch_size,
        logprobs=plan.logprobs,
        sent=plan.requests,
        delivered=delivered,
        misrouted=misrouted,
        counted=counted,
        seconds=seconds,
        router_losses=losses,
    )
