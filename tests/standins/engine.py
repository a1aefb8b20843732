"""A stand-in engine: the engine side of the protocol, without a model.

Run as ``python -m tests.standins.engine --run-dir DIR --report-endpoint EP``. It binds a
PULL at the router's ``engine`` endpoint, publishes a LOAD snapshot at start and every
``--load-interval``, acknowledges PAUSE and CONTINUE as participant ``engine``, counts
what it receives, optionally answers each GENERATE with one finished output row, and
optionally emits output batches continuously for a list of worker addresses (rows
round-robin over them), counting what it sent to each. It reports to the test like the
stand-in worker and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

import zmq

from router_core.endpoints import RouterEndpoints
from router_core.transport import bind, close_bound, send_frames
from router_core.wire import (
    Kind,
    WireError,
    decode_header,
    decode_payload,
    frame_batch,
    frame_message,
)
from router_core.wire.control import (
    Acknowledgement,
    ContinueRequest,
    LoadSnapshot,
    PauseRequest,
)
from router_core.wire.outputs import BatchStrOutput
from tests.standins.common import Reporter, add_common_arguments, stack_key, start_common

#: The engine's name as a barrier participant.
ENGINE = "engine"
RECEIVE_BUDGET = 1000
#: Batches emitted per loop iteration at most, so a late schedule cannot starve the rest.
EMIT_BURST = 64


def build_emission_ring(args: argparse.Namespace) -> list[list[bytes]]:
    """Pre-encoded batches, cycled while emitting: each row owned round-robin by an address."""
    addresses: list[str] = args.emit_to
    per_address = args.rows_per_address
    cycle = args.rids_per_address
    text = "x" * args.row_bytes
    ring = []
    for batch in range(cycle):
        rids, owners = [], []
        for row in range(per_address):
            for index, address in enumerate(addresses):
                rids.append(f"a{index}-r{(batch * per_address + row) % cycle}")
                owners.append(address)
        output = BatchStrOutput(
            rids=rids,
            http_worker_ipcs=owners,
            output_strs=[text] * len(rids),
            finished_reasons=[None] * len(rids),
            completion_tokens=[batch] * len(rids),
        )
        ring.append(frame_batch(output))
    return ring


class EngineProcess:
    """Sockets, counters and the poll loop."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        defaults = RouterEndpoints.in_run_dir(args.run_dir)
        self.endpoint = args.engine_endpoint or defaults.engine
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.inbox = bind(self.context, zmq.PULL, self.endpoint)
        self.events = self._push(args.events_endpoint or defaults.engine_events, hwm=10_000)
        self.outputs = self._push(args.outputs_endpoint or defaults.outputs, hwm=1000)
        self.reporter = Reporter(self.context, args.report_endpoint, "engine", ENGINE)
        #: Sent as the ``secret`` of every acknowledgement and load snapshot.
        self.key = stack_key(args)
        #: Messages received, by kind name.
        self.received: Counter[str] = Counter()
        #: Everything else: acks_sent, answered_rows, loads_sent, emit_blocked, bad_messages.
        self.counts: Counter[str] = Counter()
        self.generate_by_owner: Counter[str] = Counter()
        self.emitted_rows: Counter[str] = Counter()
        self.emitted_bytes: Counter[str] = Counter()
        self.paused = False
        self.pause_mode: str | None = None
        self.last_op_id = ""
        self.pending_answers: list[tuple[str, str]] = []
        self.ring = build_emission_ring(args) if args.emit_to else []
        self.emitted_batches = 0
        self.load_step = 0

    def _push(self, endpoint: str, hwm: int) -> zmq.Socket[bytes]:
        sock = self.context.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.setsockopt(zmq.SNDHWM, hwm)
        sock.connect(endpoint)
        return sock

    def snapshot(self) -> dict[str, Any]:
        return {
            "state": "paused" if self.paused else "serving",
            "paused": self.paused,
            "pause_mode": self.pause_mode,
            "last_op_id": self.last_op_id,
            "received": dict(self.received),
            **self.counts,
            "generate_by_owner": dict(self.generate_by_owner),
            "emitted_batches": self.emitted_batches,
            "emitted_rows_by_address": dict(self.emitted_rows),
            "emitted_bytes_by_address": dict(self.emitted_bytes),
        }

    # ------------------------------------------------------------------ inbound

    def on_message(self, frames: list[bytes]) -> None:
        try:
            header = decode_header(frames[0])
            payloads = [decode_payload(header.kind, frame) for frame in frames[1:]]
        except WireError:
            self.counts["bad_messages"] += 1
            return
        self.received[header.kind.name] += 1
        if header.kind is Kind.GENERATE:
            self.generate_by_owner[header.reply_to[0]] += 1
            if self.args.answer_generate:
                self.pending_answers.append((header.rids[0], header.reply_to[0]))
        elif header.kind in (Kind.PAUSE, Kind.CONTINUE) and payloads:
            op = payloads[0]
            assert isinstance(op, PauseRequest | ContinueRequest)
            self.paused = isinstance(op, PauseRequest)
            self.pause_mode = op.mode if isinstance(op, PauseRequest) else None
            self.last_op_id = op.op_id
            ack = Acknowledgement(op_id=op.op_id, participant=ENGINE, secret=self.key)
            self.events.send_multipart(frame_message(Kind.ACK, ack))
            self.counts["acks_sent"] += 1

    def answer(self) -> None:
        """One batch finishing every request received since the last call."""
        rids = [rid for rid, _ in self.pending_answers]
        owners = [owner for _, owner in self.pending_answers]
        self.pending_answers.clear()
        output = BatchStrOutput(
            rids=rids,
            http_worker_ipcs=owners,
            output_strs=["done"] * len(rids),
            finished_reasons=[{"type": "stop"}] * len(rids),
            completion_tokens=[1] * len(rids),
        )
        self.outputs.send_multipart(frame_batch(output))
        self.counts["answered_rows"] += len(rids)

    # ------------------------------------------------------------------ outbound

    def publish_load(self) -> None:
        self.load_step += 1
        snapshot = LoadSnapshot(
            running=self.received["GENERATE"] % 97,
            waiting=0,
            max_running=256,
            token_usage=0.25,
            step=self.load_step,
            taken_ns=time.time_ns(),
            secret=self.key,
        )
        self.events.send_multipart(frame_message(Kind.LOAD, snapshot))
        self.counts["loads_sent"] += 1

    def emit(self, now: float, next_emit: float) -> float:
        """Send the batches due by ``now``; return when the next one is due."""
        args = self.args
        interval = 1.0 / args.emit_rate if args.emit_rate > 0 else 0.0
        for _ in range(EMIT_BURST):
            if args.emit_batches and self.emitted_batches >= args.emit_batches:
                return float("inf")
            if next_emit > now:
                break
            frames = self.ring[self.emitted_batches % len(self.ring)]
            if not send_frames(self.outputs, frames):
                self.counts["emit_blocked"] += 1
                break
            self.emitted_batches += 1
            for address in args.emit_to:
                self.emitted_rows[address] += args.rows_per_address
                self.emitted_bytes[address] += args.rows_per_address * args.row_bytes
            # Never bank more than a short burst of credit after a stall.
            next_emit = max(next_emit + interval, now - 0.1)
        return next_emit

    # ------------------------------------------------------------------ loop

    def run(self, stop: Any) -> None:
        args = self.args
        poller = zmq.Poller()
        poller.register(self.inbox, zmq.POLLIN)
        next_load = 0.0
        next_report = 0.0
        next_emit = time.monotonic() if self.ring else float("inf")
        reported = None
        while not stop.stopping:
            now = time.monotonic()
            wake = min(next_load, next_report, next_emit)
            timeout_ms = max(0, min(100, int((wake - now) * 1000) + 1))
            if poller.poll(timeout_ms):
                for _ in range(RECEIVE_BUDGET):
                    try:
                        frames = self.inbox.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.on_message(frames)
            if self.pending_answers:
                self.answer()
            now = time.monotonic()
            if now >= next_load:
                self.publish_load()
                next_load = now + args.load_interval
            if now >= next_emit:
                next_emit = self.emit(now, next_emit)
            fingerprint = (self.paused, self.last_op_id)
            if now >= next_report or fingerprint != reported:
                self.reporter.send(self.snapshot())
                reported = fingerprint
                next_report = now + args.report_interval
        self.reporter.send({**self.snapshot(), "state": "stopped"})
        close_bound(self.inbox, self.endpoint)
        self.events.close()
        self.outputs.close()  # lingers so emitted outputs are delivered
        self.reporter.close()
        self.context.term()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="standin-engine", description=__doc__)
    add_common_arguments(parser)
    parser.add_argument("--engine-endpoint", help="PULL to bind (default: the run dir's)")
    parser.add_argument("--events-endpoint", help="the router's engine_events (default)")
    parser.add_argument(
        "--outputs-endpoint",
        help="where outputs go: the router's outputs (default) or a detokenizer router's inbound",
    )
    parser.add_argument("--load-interval", type=float, default=0.2)
    parser.add_argument("--answer-generate", action="store_true")
    parser.add_argument("--emit-to", action="append", default=[], help="a worker address")
    parser.add_argument("--emit-rate", type=float, default=100.0, help="batches per second")
    parser.add_argument("--emit-batches", type=int, default=0, help="stop after; 0: never")
    parser.add_argument("--rows-per-address", type=int, default=1)
    parser.add_argument("--rids-per-address", type=int, default=8)
    parser.add_argument("--row-bytes", type=int, default=64)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = start_common(args)
    EngineProcess(args).run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
