"""The router side of the engine link's tests: the sockets a router and a detokenizer
router would hold, owned by the test, and the messages and batches the tests send."""

from __future__ import annotations

from itertools import count

import pytest
import zmq

from router_core.engine_link import Command, EngineEndpoints, EngineLink, Request
from router_core.wire import Kind, frame_message
from router_core.wire.outputs import BatchTokenIDOutput
from router_core.wire.requests import GenerateRequest
from tests.support.eventually import wait_until

__all__ = [
    "OWNER",
    "TRACEPARENT",
    "WAIT_MS",
    "RouterSide",
    "Sides",
    "generate",
    "inproc_endpoints",
    "poll_until",
    "token_batch",
]

#: How long a receive may wait before the test fails instead of hanging.
WAIT_MS = 2000
OWNER = "ipc:///tmp/sb-unit/worker-w0"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_names = count()


def inproc_endpoints() -> EngineEndpoints:
    """Fresh inproc endpoints (no files, one context)."""
    n = next(_names)
    return EngineEndpoints(
        inbound=f"inproc://engine-{n}", events=f"inproc://events-{n}", outputs=f"inproc://out-{n}"
    )


class RouterSide:
    """The sockets a router and a detokenizer router would hold, owned by the test."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], endpoints: EngineEndpoints, hwm: int
    ) -> None:
        self._owned: list[zmq.Socket[bytes]] = []
        self._hwm = hwm
        self.requests = self._socket(context, zmq.PUSH)
        self.requests.connect(endpoints.inbound)
        self.events = self._socket(context, zmq.PULL)
        self.events.bind(endpoints.events)
        self.outputs = self._socket(context, zmq.PULL)
        self.outputs.bind(endpoints.outputs)

    def _socket(self, context: zmq.Context[zmq.Socket[bytes]], kind: int) -> zmq.Socket[bytes]:
        sock = context.socket(kind)
        self._owned.append(sock)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, self._hwm)
        return sock

    def close(self) -> None:
        for sock in self._owned:
            sock.close(linger=0)

    def send(self, *messages: list[bytes]) -> None:
        for frames in messages:
            self.requests.send_multipart(frames)

    @staticmethod
    def receive(sock: zmq.Socket[bytes]) -> list[bytes]:
        """One message, or fail after WAIT_MS."""
        if not sock.poll(WAIT_MS, zmq.POLLIN):
            pytest.fail(f"no message within {WAIT_MS} ms")
        return sock.recv_multipart()


class Sides:
    """Router sides made by one test, closed at teardown even if the test fails."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._made: list[RouterSide] = []

    def make(self, endpoints: EngineEndpoints, hwm: int = 1000) -> RouterSide:
        side = RouterSide(self._context, endpoints, hwm)
        self._made.append(side)
        return side

    def close(self) -> None:
        for side in self._made:
            side.close()


def poll_until(link: EngineLink, wanted: int) -> list[Request | Command]:
    """Poll until ``wanted`` inputs arrived (or fail)."""
    items: list[Request | Command] = []

    def arrived() -> bool:
        items.extend(link.poll(50))
        return len(items) >= wanted

    wait_until(arrived, WAIT_MS / 1000, lambda: f"{wanted} inputs ({items})", interval=0.001)
    assert len(items) == wanted, items
    return items


def generate(rid: str, **header: str) -> list[bytes]:
    request = GenerateRequest(rid=rid, input_ids=[1, 2, 3])
    return frame_message(Kind.GENERATE, request, rids=[rid], reply_to=[OWNER], **header)


def token_batch(rids: list[str]) -> BatchTokenIDOutput:
    return BatchTokenIDOutput(
        rids=rids,
        http_worker_ipcs=[OWNER] * len(rids),
        finished_reasons=[None] * len(rids),
        output_ids=[[7, i] for i in range(len(rids))],
        completion_tokens=[2] * len(rids),
    )
