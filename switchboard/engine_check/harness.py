"""engine-check's sockets: it plays the routers' part on the engine's own endpoints.

It binds a PULL at ``events`` and one at ``outputs`` (where the tokenizer router and the
detokenizer router would) and connects a PUSH to the engine's ``inbound``. Everything
sent is framed by the real encoders (:func:`router_core.wire.frame_message`); everything
received is decoded by the real decoders (:func:`router_core.wire.decode_message`), and
a message that does not decode is kept as an :class:`Undecodable`: itself a finding.
Every wait is bounded by a :func:`time.monotonic` deadline. Sockets exist between
:meth:`Harness.open` and :meth:`Harness.close` (or the ``with`` block).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

import msgspec
import zmq

from router_core.endpoints import EngineEndpoints
from router_core.transport import MalformedMessage, bind, close_bound, recv_message
from router_core.wire import Kind, WireError, decode_message, frame_message
from router_core.wire.control import Acknowledgement, LoadSnapshot
from router_core.wire.engine_commands import CommandReply
from switchboard.engine_check.rows import Message

__all__ = ["SEND_TIMEOUT_MS", "Harness", "Received", "Undecodable"]

#: How long one send may wait for the engine to take a message.
SEND_TIMEOUT_MS: Final = 2000


@dataclass(frozen=True)
class Received:
    """A decoded message and when it came (monotonic seconds)."""

    message: Message
    at: float


@dataclass(frozen=True)
class Undecodable:
    """A message from the engine that the real decoder refused: on which socket, why."""

    socket: str
    reason: str


@dataclass
class Inbox:
    """Everything received so far, per socket, in arrival order."""

    events: list[Received] = field(default_factory=list)
    outputs: list[Received] = field(default_factory=list)
    undecodable: list[Undecodable] = field(default_factory=list)


class Harness:
    """The routers' side of one engine's three endpoints."""

    def __init__(self, endpoints: EngineEndpoints, also_outputs: Sequence[str] = ()) -> None:
        """``also_outputs``: more endpoints to take outputs at (an engine started by hand
        may send them to the detokenizer router's or to the tokenizer router's)."""
        self.endpoints = endpoints
        self.inbox = Inbox()
        self._output_endpoints = (endpoints.outputs, *also_outputs)
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._events: zmq.Socket[bytes] | None = None
        self._outputs: list[zmq.Socket[bytes]] = []
        self._inbound: zmq.Socket[bytes] | None = None

    def open(self) -> Harness:
        """Bind ``events`` and ``outputs``, connect ``inbound``."""
        self._context = zmq.Context()
        try:
            self._events = bind(self._context, zmq.PULL, self.endpoints.events)
            for endpoint in self._output_endpoints:
                self._outputs.append(bind(self._context, zmq.PULL, endpoint))
            self._inbound = self._connect_inbound(self._context)
        except BaseException:
            self.close()
            raise
        return self

    def _connect_inbound(self, context: zmq.Context[zmq.Socket[bytes]]) -> zmq.Socket[bytes]:
        inbound = context.socket(zmq.PUSH)
        inbound.setsockopt(zmq.LINGER, 0)
        inbound.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        # Queue for an engine that has not bound yet: the routers' destinations keep a
        # backlog for it in the same way.
        inbound.setsockopt(zmq.IMMEDIATE, 0)
        inbound.connect(self.endpoints.inbound)
        return inbound

    def reconnect_inbound(self) -> None:
        """Connect ``inbound`` afresh, dropping what waits for an engine that is gone (so
        a restarted engine gets only what is sent from now on)."""
        assert self._context is not None and self._inbound is not None, "open() first"
        self._inbound.close(linger=0)
        self._inbound = self._connect_inbound(self._context)

    def close(self) -> None:
        """Close every socket (removing the socket files bound); safe to call twice."""
        if self._inbound is not None:
            self._inbound.close(linger=0)
        if self._events is not None:
            close_bound(self._events, self.endpoints.events)
        for sock, endpoint in zip(self._outputs, self._output_endpoints, strict=False):
            close_bound(sock, endpoint)
        if self._context is not None:
            self._context.term()
        self._context = self._events = self._inbound = None
        self._outputs = []

    def __enter__(self) -> Harness:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def send_raw(self, frames: Sequence[bytes]) -> bool:
        """Send ``frames`` as one message to the engine; False if it took none in time."""
        assert self._inbound is not None, "open() first"
        try:
            self._inbound.send_multipart(list(frames))
        except zmq.Again:
            return False
        return True

    def send(
        self,
        kind: Kind,
        payload: msgspec.Struct,
        *,
        rid: str | None = None,
        reply_to: str | None = None,
    ) -> bool:
        """Frame ``payload`` as a message of ``kind`` (a request names its ``rid`` and
        owner ``reply_to``; an abort_all no rid) and send it to the engine."""
        rids = [rid] if rid is not None else []
        owners = [reply_to] if reply_to is not None else []
        return self.send_raw(frame_message(kind, payload, rids=rids, reply_to=owners))

    def pump(self, timeout_s: float) -> None:
        """Receive for up to ``timeout_s`` (at least once without waiting)."""
        self._receive_until(time.monotonic() + timeout_s, lambda: False)

    def wait(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Receive until ``condition()`` holds or ``timeout_s`` has passed; whether it held."""
        return self._receive_until(time.monotonic() + timeout_s, condition)

    def _receive_until(self, deadline: float, condition: Callable[[], bool]) -> bool:
        assert self._events is not None and self._outputs, "open() first"
        poller = zmq.Poller()
        poller.register(self._events, zmq.POLLIN)
        for sock in self._outputs:
            poller.register(sock, zmq.POLLIN)
        while True:
            if condition():
                return True
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            ready = dict(poller.poll(min(left_ms, 50)))
            if self._events in ready:
                self._drain(self._events, "events", self.inbox.events)
            for sock in self._outputs:
                if sock in ready:
                    self._drain(sock, "outputs", self.inbox.outputs)
            if not ready and time.monotonic() >= deadline:
                return condition()

    def _drain(self, sock: zmq.Socket[bytes], name: str, into: list[Received]) -> None:
        for _ in range(1000):  # bounded: let the other socket and the deadline have a turn
            try:
                frames = recv_message(sock)
            except zmq.Again:
                return
            except MalformedMessage as exc:
                self.inbox.undecodable.append(Undecodable(name, exc.reason))
                continue
            raw = [frame if isinstance(frame, bytes) else frame.bytes for frame in frames]
            try:
                header, payloads = decode_message(raw)
            except WireError as exc:
                self.inbox.undecodable.append(Undecodable(name, str(exc)))
                continue
            into.append(Received(Message(header, payloads), time.monotonic()))

    def loads(self, since: int = 0) -> list[LoadSnapshot]:
        """The ``LOAD`` snapshots received on events, from the ``since``-th event on."""
        return [
            payload
            for received in self.inbox.events[since:]
            if received.message.header.kind is Kind.LOAD
            for payload in received.message.rows
            if isinstance(payload, LoadSnapshot)
        ]

    def acks(self, op: str, since: int = 0) -> list[Acknowledgement]:
        """The ``ACK`` messages received for operation ``op``, from the ``since``-th event on."""
        return [
            payload
            for received in self.inbox.events[since:]
            if received.message.header.kind is Kind.ACK
            for payload in received.message.rows
            if isinstance(payload, Acknowledgement) and payload.op_id == op
        ]

    def ack_sent_ns(self, op: str, since: int = 0) -> int:
        """The header ``sent_ns`` (the engine's clock) of the first ``ACK`` of ``op`` from
        the ``since``-th event on; 0 if none, or unstamped."""
        for received in self.inbox.events[since:]:
            message = received.message
            if message.header.kind is Kind.ACK and any(
                isinstance(payload, Acknowledgement) and payload.op_id == op
                for payload in message.rows
            ):
                return message.header.sent_ns
        return 0

    def replies(self, op: str, since: int = 0) -> list[tuple[CommandReply, int]]:
        """The ``COMMAND_REPLY`` messages received for engine command ``op``, from the
        ``since``-th event on, each with its header ``sent_ns`` (the engine's clock, 0:
        unstamped)."""
        return [
            (payload, received.message.header.sent_ns)
            for received in self.inbox.events[since:]
            if received.message.header.kind is Kind.COMMAND_REPLY
            for payload in received.message.rows
            if isinstance(payload, CommandReply) and payload.op_id == op
        ]

    def output_messages(self, since: int = 0) -> list[Message]:
        """The output messages received, from the ``since``-th on."""
        return [received.message for received in self.inbox.outputs[since:]]
