"""A stand-in HTTP worker process: the worker side of the protocol, without HTTP.

Run as ``python -m tests.standins.worker --run-dir DIR --worker-id ID --report-endpoint
EP``. It binds a PULL at its return address, registers with the router (again whenever
told to), heartbeats every ``--heartbeat-interval`` and on every change of state, obeys
pause broadcasts and drain commands, sends ``--requests`` GENERATE requests, counts every
output row it receives (and every row not addressed to it), and reports what it saw to
the test every ``--report-interval`` and on every change. On SIGTERM it deregisters,
closes its sockets, removes its socket file and exits 0.

The protocol logic lives in :mod:`tests.standins.worker_state`; this module is sockets
and timers.
"""

from __future__ import annotations

import argparse
import sys
import time

import zmq

from router_core.endpoints import RouterEndpoints, worker_address
from router_core.transport import bind, close_bound
from router_core.wire.codec import Frames
from tests.standins.common import (
    Reporter,
    StopFlag,
    add_common_arguments,
    stack_key,
    start_common,
)
from tests.standins.worker_state import StandInWorker

#: Resend a registration that got no reply within this long.
REGISTER_RETRY_S = 1.0
#: Messages handled per wake-up, so timers run even under a flood.
RECEIVE_BUDGET = 1000


class WorkerProcess:
    """Sockets, timers and the poll loop around a :class:`StandInWorker`."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        address = args.address or worker_address(args.run_dir, args.worker_id)
        self.worker = StandInWorker(
            args.worker_id,
            address,
            requests=args.requests,
            after_load=args.requests_after_load,
            max_new_tokens=args.max_new_tokens,
            key=stack_key(args),
        )
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.inbox = bind(self.context, zmq.PULL, address)
        endpoints = RouterEndpoints.in_run_dir(args.run_dir)
        # Registry traffic and requests travel on separate sockets, as the router expects.
        self.router = self._push(args.router_endpoint or endpoints.workers)
        self.requests = self._push(args.requests_endpoint or endpoints.requests)
        self.reporter = Reporter(self.context, args.report_endpoint, "worker", args.worker_id)
        self.next_heartbeat = 0.0
        self.next_request = 0.0
        self.register_retry_at = 0.0

    def _push(self, endpoint: str) -> zmq.Socket[bytes]:
        sock = self.context.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 1000)  # long enough for the deregistration to leave
        sock.setsockopt(zmq.SNDHWM, 100_000)
        sock.connect(endpoint)
        return sock

    def send(self, messages: list[Frames]) -> None:
        for frames in messages:
            self.router.send_multipart(frames)

    def register(self, times: int = 1) -> None:
        self.send([self.worker.registration() for _ in range(times)])
        self.register_retry_at = time.monotonic() + REGISTER_RETRY_S

    def heartbeat(self) -> None:
        self.send([self.worker.heartbeat()])
        self.next_heartbeat = time.monotonic() + self.args.heartbeat_interval

    def send_due_requests(self, now: float) -> None:
        rate = self.args.request_rate
        while self.worker.requests_left > 0 and (rate <= 0 or now >= self.next_request):
            self.requests.send_multipart(self.worker.next_request())
            if rate > 0:
                self.next_request = max(self.next_request + 1.0 / rate, now - 1.0)

    def receive(self) -> None:
        w = self.worker
        for _ in range(RECEIVE_BUDGET):
            try:
                frames = self.inbox.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            before, was_pending = w.state, w.registration_pending
            self.send(w.on_message([frame.buffer for frame in frames]))
            if w.registration_pending and not was_pending:  # told to register again
                self.register_retry_at = time.monotonic() + REGISTER_RETRY_S
            if w.state != before and w.registered:
                self.heartbeat()

    def timeout_ms(self, now: float, next_report: float) -> int:
        w = self.worker
        deadlines = [next_report]
        if w.registered:
            deadlines.append(self.next_heartbeat)
        if w.requests_left > 0:
            deadlines.append(self.next_request)
        if w.registration_pending:
            deadlines.append(self.register_retry_at)
        return max(0, min(100, int((min(deadlines) - now) * 1000) + 1))

    def run(self, stop: StopFlag) -> None:
        w = self.worker
        poller = zmq.Poller()
        poller.register(self.inbox, zmq.POLLIN)
        self.register(1 + self.args.extra_registrations)
        next_report = 0.0
        reported = None
        while not stop.stopping:
            if poller.poll(self.timeout_ms(time.monotonic(), next_report)):
                self.receive()
            now = time.monotonic()
            if w.registration_pending and now >= self.register_retry_at:
                self.register()
            if w.registered and now >= self.next_heartbeat:
                self.heartbeat()
            if w.registered:
                self.send_due_requests(now)
            if now >= next_report or w.fingerprint() != reported:
                self.reporter.send(w.snapshot())
                reported = w.fingerprint()
                next_report = now + self.args.report_interval
        self.shutdown()

    def shutdown(self) -> None:
        w = self.worker
        if w.registered:
            self.send([w.deregistration()])
        self.reporter.send({**w.snapshot(), "state": "stopped"})
        close_bound(self.inbox, w.address)
        self.router.close()  # lingers so the deregistration leaves
        self.requests.close()
        self.reporter.close()
        self.context.term()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="standin-worker", description=__doc__)
    add_common_arguments(parser)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--address", help="return address (default: worker_address())")
    parser.add_argument("--router-endpoint", help="the router's workers PULL (default: run dir)")
    parser.add_argument("--requests-endpoint", help="the router's requests PULL (default: run dir)")
    parser.add_argument("--heartbeat-interval", type=float, default=0.2)
    parser.add_argument("--requests", type=int, default=0, help="GENERATE requests to send")
    parser.add_argument("--max-new-tokens", type=int, default=1, help="per GENERATE request")
    parser.add_argument("--request-rate", type=float, default=0.0, help="per second; 0: at once")
    parser.add_argument(
        "--requests-after-load",
        action="store_true",
        help="send the requests once a load snapshot shows the engine is up",
    )
    parser.add_argument(
        "--extra-registrations", type=int, default=0, help="register this many more times"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = start_common(args)
    WorkerProcess(args).run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
