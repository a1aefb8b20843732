"""Forward hop: worker -> (router | zmq.proxy | nothing) -> engine, in messages/s.

One sender PUSHes ``[header, GenerateRequest payload]`` messages and one receiver PULLs
them; both are the same code on every path, only the endpoints differ. The sender first
sends empty-payload warm-up messages until the receiver has seen one, so every link of
the path is connected before the timed messages leave; the receiver times the span from
the first to the last timed message. The sender stays open until the receiver is done,
because a PUSH closed right after sending can lose its tail (libzmq#4660).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Final, Literal

import zmq

from router_core.endpoints import RouterEndpoints, worker_address
from router_core.wire import Header, Kind, encode_header, encode_payload
from router_core.wire.requests import GenerateRequest
from switchboard.bench.hops import (
    BENCH_HWM,
    router_losses,
    serve_proxy,
    serve_router,
    wait_router_ready,
)
from switchboard.bench.procs import CONTEXT, ProcessGroup, Report, trial_dir

__all__ = ["PATHS", "HopPath", "HopRun", "TrialSpec", "generate_payload", "measure_forward"]

HopPath = Literal["direct", "proxy", "switchboard"]

#: Every path, in the order tables list them.
PATHS: Final[tuple[HopPath, ...]] = ("direct", "proxy", "switchboard")

#: A receiver that sees nothing for this long gives up and reports what it has.
IDLE_TIMEOUT_MS: Final = 5000

#: A forward trial's router never sees a heartbeat, and needs none.
_ROUTER_HEARTBEAT_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class TrialSpec:
    """What the sender and the receiver of one trial agree on."""

    size: int
    count: int
    reply_to: str
    #: Set by the receiver at the first warm-up message: the whole path is connected.
    warm: Event
    #: Set by the receiver when it is done: the sender may close.
    done: Event


@dataclass(frozen=True)
class HopRun:
    """One trial of one path: what was sent, what arrived, and how fast."""

    path: HopPath
    size: int
    sent: int
    delivered: int
    malformed: int
    seconds: float
    #: The router's own ``dropped``/``rejected`` counters (switchboard path only).
    router_losses: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every message arrived, intact."""
        return self.delivered == self.sent and self.malformed == 0

    @property
    def rate(self) -> float:
        """Messages per second between the first and the last arrival."""
        if self.seconds <= 0 or self.delivered < 2:
            return 0.0
        return (self.delivered - 1) / self.seconds


def generate_payload(size: int, rid: str = "bench-0000000") -> bytes:
    """An encoded ``GenerateRequest`` of exactly ``size`` bytes (prompt ids, then text)."""
    ids = [1000 + (i * 7919) % 50000 for i in range(max(0, (size - 64) // 3))]
    for pad in range(size):
        payload = encode_payload(GenerateRequest(rid=rid, input_ids=ids, text="x" * pad))
        if len(payload) == size:
            return payload
        if len(payload) > size:
            ids = ids[:-1]
    raise ValueError(f"no GenerateRequest encodes to exactly {size} bytes")


def _headers(count: int, reply_to: str) -> list[bytes]:
    now = time.time_ns()
    return [
        encode_header(Header(Kind.GENERATE, [f"bench-{i:07d}"], [reply_to], now))
        for i in range(count)
    ]


def send_messages(report: Report, endpoint: str, spec: TrialSpec) -> None:
    """PUSH warm-ups until ``spec.warm`` is set, then the timed messages; wait for done."""
    heads = _headers(spec.count, spec.reply_to)
    payload = generate_payload(spec.size)
    warm_head = encode_header(Header(Kind.GENERATE, ["warm-up"], [spec.reply_to]))
    warm = spec.warm
    context = zmq.Context()
    sock = context.socket(zmq.PUSH)
    try:
        sock.setsockopt(zmq.SNDHWM, BENCH_HWM)
        sock.connect(endpoint)
        send = sock.send
        while not warm.is_set():
            send(warm_head, zmq.SNDMORE)
            send(b"")
            warm.wait(0.002)
        for head in heads:
            send(head, zmq.SNDMORE)
            send(payload)
        spec.done.wait(IDLE_TIMEOUT_MS / 1000 * 4)
    finally:
        sock.close(linger=0)
        context.term()


def receive_messages(report: Report, endpoint: str, spec: TrialSpec) -> None:
    """PULL until ``spec.count`` timed messages arrived (or the line went idle); report.

    Reports ``("result", {"delivered", "malformed", "first_ns", "last_ns"})``. A timed
    message has a non-empty payload; a message that is not exactly two frames is
    consumed and counted as malformed.
    """
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    delivered = malformed = first_ns = last_ns = 0
    try:
        sock.setsockopt(zmq.RCVHWM, BENCH_HWM)
        sock.setsockopt(zmq.RCVTIMEO, IDLE_TIMEOUT_MS)
        sock.bind(endpoint)
        report.send(("ready", None))
        recv = sock.recv
        try:
            while True:
                recv()
                body = recv(copy=False)
                if len(body):
                    break
                spec.warm.set()
            first_ns = last_ns = time.monotonic_ns()
            delivered = 1
            count = spec.count
            while delivered < count:
                recv()
                body = recv(copy=False)
                if body.more:
                    malformed += 1
                    while body.more:
                        body = recv(copy=False)
                elif len(body):
                    delivered += 1
            last_ns = time.monotonic_ns()
        except zmq.Again:
            pass  # idle: report what arrived; the trial shows as incomplete
        report.send(
            (
                "result",
                {
                    "delivered": delivered,
                    "malformed": malformed,
                    "first_ns": first_ns,
                    "last_ns": last_ns,
                },
            )
        )
    finally:
        spec.done.set()
        sock.close(linger=0)
        context.term()


def measure_forward(
    path: HopPath, size: int, count: int, *, root: str | Path | None = None
) -> HopRun:
    """Run one trial of ``path`` with ``count`` messages of ``size`` payload bytes."""
    with trial_dir(root) as run_dir, ProcessGroup() as group:
        endpoints = RouterEndpoints.in_run_dir(run_dir)
        sink = endpoints.engine
        reply_to = worker_address(run_dir, "bench-0")
        spec = TrialSpec(size, count, reply_to, CONTEXT.Event(), CONTEXT.Event())
        receiver = group.start("receiver", receive_messages, sink, spec)
        group.expect(receiver, "ready")
        if path == "switchboard":
            group.start("router", serve_router, str(run_dir), _ROUTER_HEARTBEAT_TIMEOUT_S)
            wait_router_ready(run_dir)
            entry = endpoints.requests
        elif path == "proxy":
            entry = f"ipc://{run_dir / 'proxy-in'}"
            group.expect(group.start("proxy", serve_proxy, entry, sink), "ready")
        else:
            entry = sink
        group.start("sender", send_messages, entry, spec)
        result = group.expect(receiver, "result", _result_timeout_s(count))
        losses = router_losses(group, run_dir) if path == "switchboard" else {}
    return HopRun(
        path=path,
        size=size,
        sent=count,
        delivered=result["delivered"],
        malformed=result["malformed"],
        seconds=(result["last_ns"] - result["first_ns"]) / 1e9,
        router_losses=losses,
    )


def _result_timeout_s(count: int) -> float:
    """Generous: the receiver reports on its own once the line has been idle."""
    return 60.0 + count / 1000
