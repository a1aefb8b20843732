"""The engine link: what an engine uses to take part in a Switchboard stack.

An engine binds one PULL, where the tokenizer router sends it requests (``GENERATE``,
``EMBED``, ``ABORT``) and commands (``PAUSE``, ``CONTINUE``, ``FREEZE_GC``, and an
operator's ``ENGINE_COMMAND``), and connects two PUSHes: ``events`` (acknowledgements,
answers to engine commands and load snapshots, to the router: :mod:`.events`) and
``outputs`` (batches, idle batches and freeze-GC, to the detokenizer router or to the
router). :class:`EngineLink` owns the three sockets; the engine calls :meth:`EngineLink.poll`
in its loop and the send methods in between. One thread uses a link; it is not
thread-safe.

Every inbound message is validated before the engine sees it (header, frame count, kind,
payload, and that the payload's ``rid`` is the header's); whatever fails is counted in
``link.counters`` under ``rejected`` with a reason and skipped, never raised. What an
engine must not act on twice after a fault (an operation no newer than the last one
applied, a re-sent request that is still open) is kept from it by an
:class:`~router_core.engine_link.gate.InputGate`: the operation is acknowledged here, the
duplicate counted under ``duplicates``.

Backpressure: sends never block. Each PUSH has ZeroMQ's queue (``hwm`` messages) and, in
front of it, a backlog of ``backlog_limit`` messages (:mod:`router_core.destinations`). A
message the socket refuses waits in the backlog, which every send and every
:meth:`EngineLink.poll` flush, in order; a message that finds the backlog full is dropped,
counted as ``dropped{backlog_full}``, and the send returns False. So an engine whose
peers stall keeps running, uses bounded memory, and learns of every loss.

``key`` (the stack key, ``<run dir>/stack.key``) goes in the ``secret`` of every
acknowledgement and load snapshot: a router that has a key refuses those without it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final

import msgspec
import zmq

from router_core import tracing
from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.endpoints import EngineEndpoints, check_endpoint
from router_core.engine_link.events import acknowledgement, command_reply, load_message
from router_core.engine_link.gate import InputGate
from router_core.engine_link.inputs import EngineInput, Request, read_input
from router_core.engine_link.traces import RequestSpans
from router_core.inbound import BUDGET, drain
from router_core.transport import (
    DEFAULT_BACKLOG,
    DEFAULT_HWM,
    MAX_FRAMES,
    FrameLike,
    bind,
    close_bound,
)
from router_core.wire import (
    Header,
    Kind,
    WireError,
    decode_header,
    frame_batch,
    frame_message,
)
from router_core.wire.control import (
    ContinueRequest,
    FreezeGC,
    LoadSnapshot,
    PauseRequest,
)
from router_core.wire.engine_commands import ReplyCode
from router_core.wire.outputs import (
    BatchEmbeddingOutput,
    BatchOutput,
    BatchStrOutput,
    BatchTokenIDOutput,
)
from router_core.wire.regroup import regroup

__all__ = ["MAX_BATCH_ROWS", "EngineLink"]

#: The most rows one batch message may carry; :meth:`EngineLink.send_batch` splits more.
MAX_BATCH_ROWS: Final = MAX_FRAMES - 1

_BATCH_LABELS: Final[dict[type[BatchOutput], str]] = {
    BatchTokenIDOutput: "token_batch",
    BatchStrOutput: "str_batch",
    BatchEmbeddingOutput: "embedding_batch",
}


class EngineLink:
    """The engine's three sockets; opened by :meth:`open` or ``with``, never in ``__init__``.

    ``context`` is used if given (and left running on close); otherwise the link makes
    and terminates its own. ``budget`` bounds the messages one :meth:`poll` returns.
    """

    def __init__(
        self,
        endpoints: EngineEndpoints,
        *,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        hwm: int = DEFAULT_HWM,
        backlog_limit: int = DEFAULT_BACKLOG,
        budget: int = BUDGET,
        allow_remote: bool = False,
        key: str | None = None,
    ) -> None:
        if min(hwm, backlog_limit, budget) <= 0:
            raise ValueError("hwm, backlog_limit and budget must be positive (bounded queues)")
        self.endpoints = endpoints
        self.counters = Counters()
        self._context = context
        self._hwm = hwm
        self._backlog_limit = backlog_limit
        self._budget = budget
        self._allow_remote = allow_remote
        self._key = key or ""
        self._open: _OpenLink | None = None
        self._spans = RequestSpans()
        self._gate = InputGate()

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_open(self) -> bool:
        """Whether the sockets are open."""
        return self._open is not None

    def open(self) -> EngineLink:
        """Bind ``inbound`` and connect ``events`` and ``outputs``; return the link.

        Raises ``EndpointError`` for an endpoint the loopback rule refuses, and
        ``zmq.ZMQError`` if binding fails (for example another engine holds the path).
        """
        if self._open is not None:
            raise RuntimeError("the engine link is already open")
        endpoints = self.endpoints
        for endpoint in (endpoints.events, endpoints.outputs):
            check_endpoint(endpoint, allow_remote=self._allow_remote)
        context = self._context or zmq.Context()
        destinations = DestinationSet(
            context, self.counters, hwm=self._hwm, backlog_limit=self._backlog_limit
        )
        inbound: zmq.Socket[bytes] | None = None
        try:
            inbound = bind(
                context, zmq.PULL, endpoints.inbound, hwm=self._hwm, allow_remote=self._allow_remote
            )
            events = destinations.get("events", endpoints.events)
            outputs = destinations.get("outputs", endpoints.outputs)
            # Connect now, so the connections are up by the first send.
            events.socket  # noqa: B018
            outputs.socket  # noqa: B018
        except BaseException:
            destinations.close_all(0.0)
            if inbound is not None:
                close_bound(inbound, endpoints.inbound)
            if self._context is None:
                context.term()
            raise
        poller = zmq.Poller()
        poller.register(inbound, zmq.POLLIN)
        self._open = _OpenLink(
            context, inbound, poller, destinations, events, outputs, time.time_ns()
        )
        self._gate = InputGate()  # a new incarnation: nothing applied, nothing open
        return self

    def close(self, drain_timeout_s: float = 2.0) -> None:
        """Flush backlogs for up to ``drain_timeout_s``, then close; safe to call twice.

        What is still queued at the deadline is dropped and counted as ``dropped{closed}``;
        what ZeroMQ already holds gets the rest of the deadline to leave.
        """
        link, self._open = self._open, None
        if link is None:
            return
        self._spans.close()
        try:
            link.destinations.close_all(drain_timeout_s)
        finally:
            close_bound(link.inbound, self.endpoints.inbound)
            if self._context is None:
                link.context.term()

    def __enter__(self) -> EngineLink:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _link(self) -> _OpenLink:
        if self._open is None:
            raise RuntimeError("the engine link is not open (call open() or use `with`)")
        return self._open

    # ------------------------------------------------------------------ inbound

    def poll(self, timeout_ms: int = 0) -> list[EngineInput]:
        """Wait up to ``timeout_ms`` for input, then return what is waiting, in order.

        At most ``budget`` messages are returned per call; call again for the rest.
        Backlogged sends are flushed while waiting. Invalid messages are counted under
        ``rejected`` and left out.
        """
        if timeout_ms < 0:
            raise ValueError("timeout_ms must not be negative")
        link = self._link()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            for dest in link.destinations.backlogged():
                dest.flush()
            waiting = link.destinations.backlogged()
            for dest in waiting:
                link.poller.register(dest.socket, zmq.POLLOUT)
            remaining_ms = max(0, round((deadline - time.monotonic()) * 1000))
            try:
                ready = dict(link.poller.poll(remaining_ms))
            finally:
                for dest in waiting:
                    link.poller.unregister(dest.socket)
            if ready.get(link.inbound, 0) & zmq.POLLIN or remaining_ms == 0:
                break
            if time.monotonic() >= deadline:
                break
        items: list[EngineInput] = []
        drain(
            link.inbound,
            lambda h, frames: self._take(h, frames, items),
            self.counters,
            self._budget,
        )
        return items

    def _take(self, header: Header, frames: list[FrameLike], into: list[EngineInput]) -> None:
        try:
            item = read_input(header, frames)
        except WireError as exc:
            self.counters.add("rejected", exc.reason)
            return
        self.counters.add("received", header.kind.name.lower())
        duplicate = self._gate.screen(item)
        if duplicate is not None:
            self.counters.add("duplicates", duplicate)
            if isinstance(item.payload, PauseRequest | ContinueRequest):
                self.acknowledge(item.payload.op_id)  # applied before; the barrier hears it
            return
        if tracing.enabled() and isinstance(item, Request):
            item = self._spans.on_request(item)
        into.append(item)

    # ------------------------------------------------------------------ outbound

    def send_batch(
        self, batch: BatchOutput, *, traceparent: str = "", tracestate: str = ""
    ) -> bool:
        """Send a column-shaped batch as one row per request; False if any part was dropped.

        ``batch.http_worker_ipcs`` must name each row's owner (a :class:`Request`'s
        ``reply_to``); a batch of more than :data:`MAX_BATCH_ROWS` rows goes as several
        messages. Raises ``WireError`` for a batch that is not well-formed (no owners,
        columns of the wrong length): that is a bug in the caller, not a peer's fault.

        With tracing on, rows of traced requests carry their ``engine request`` span's
        context in the header's ``row_traces``, the send is an ``engine emit_batch`` span,
        and the request spans of finishing rows end (see :mod:`.traces`).
        """
        self._gate.finished(batch.rids, batch.http_worker_ipcs, batch.finished_reasons)
        if not self._spans:  # always so while tracing is off
            return self._send_rows(batch, traceparent, tracestate, ())
        row_traces = self._spans.row_traces(batch)
        try:
            with tracing.batch_span("engine emit_batch", row_traces, kind="producer"):
                return self._send_rows(batch, traceparent, tracestate, row_traces)
        finally:
            self._spans.finish(batch)

    def _send_rows(
        self, batch: BatchOutput, traceparent: str, tracestate: str, row_traces: Sequence[str]
    ) -> bool:
        frames = frame_batch(
            batch, traceparent=traceparent, tracestate=tracestate, row_traces=row_traces
        )
        rows = len(frames) - 1
        outputs, label = self._link().outputs, _BATCH_LABELS[type(batch)]
        if rows <= MAX_BATCH_ROWS:
            return self._send(outputs, frames, label)
        header = decode_header(frames[0])
        sent = [
            self._send(
                outputs, regroup(header, frames, range(i, min(i + MAX_BATCH_ROWS, rows))), label
            )
            for i in range(0, rows, MAX_BATCH_ROWS)
        ]
        return all(sent)

    def send_idle(self) -> bool:
        """Send the idle (empty) batch: a step with nothing to report."""
        return self._send(self._link().outputs, frame_message(Kind.IDLE, None), "idle")

    def forward_freeze_gc(self, command: FreezeGC | None = None) -> bool:
        """Pass freeze-GC on to ``outputs`` (every detokenizer, or every worker)."""
        frames = frame_message(Kind.FREEZE_GC, command or FreezeGC(reason="engine"))
        return self._send(self._link().outputs, frames, "freeze_gc")

    def acknowledge(self, op_id: str) -> bool:
        """Tell the router that pause/continue ``op_id`` has been applied."""
        return self._send(self._link().events, acknowledgement(op_id, self._key), "ack")

    def answer_command(
        self,
        op_id: str,
        result: msgspec.Struct | None = None,
        *,
        code: ReplyCode | None = None,
        message: str = "",
    ) -> bool:
        """Answer engine command ``op_id``: done, with ``result`` (the command's reply
        struct, or None for one without figures), or refused with ``code`` and
        ``message`` (one sentence naming what was wrong)."""
        frames = command_reply(op_id, result, code, message, self._key)
        return self._send(self._link().events, frames, "command_reply")

    def publish_load(self, snapshot: LoadSnapshot) -> bool:
        """Publish a load snapshot; also keeps the engine live. ``taken_ns`` is stamped
        now and ``engine_started_ns`` with when the link opened, where they are 0 (the
        latter is how workers notice an engine restart); ``secret`` is the link's key."""
        frames = load_message(
            snapshot, self._key, opened_ns=self._link().opened_ns, now_ns=time.time_ns()
        )
        return self._send(self._link().events, frames, "load")

    def backlogs(self) -> dict[str, int]:
        """Messages waiting per socket (``events``, ``outputs``), for throttling or metrics."""
        return self._link().destinations.backlog_sizes()

    def _send(self, dest: Destination, frames: Sequence[FrameLike], label: str) -> bool:
        if dest.backlog:
            dest.flush()  # keep the order, and make room before queueing more
        if not dest.send(frames):
            return False  # counted under dropped by the destination
        self.counters.add("sent", label)
        return True


@dataclass(frozen=True)
class _OpenLink:
    """The sockets of an open link."""

    context: zmq.Context[zmq.Socket[bytes]]
    inbound: zmq.Socket[bytes]
    poller: zmq.Poller
    destinations: DestinationSet
    events: Destination
    outputs: Destination
    #: When the link opened (Unix ns): this engine incarnation's start.
    opened_ns: int
