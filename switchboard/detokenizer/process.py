"""The detokenizer process: a PULL bound at its endpoint, text batches out.

It receives what the detokenizer router sends it (``TOKEN_BATCH``, ``EMBEDDING_BATCH``,
``FREEZE_GC``, ``IDLE``), passes embedding rows on untouched, turns every token row into
a text row with a
:class:`~switchboard.detokenizer.rows.RowDetokenizer`, and sends the text rows on: by
default straight to the owning workers' return addresses, one ``STR_BATCH`` per worker
(``outputs_to="workers"``), or all of them in one message to the tokenizer router's
``outputs`` (``outputs_to="router"``), which splits them per worker. Sends never block:
each destination has a bounded backlog and drops are counted.

Workers come and go, so their sockets are bounded too. Every ``evict_interval_s`` the
detokenizer forgets idle request states, then closes (linger 0) and forgets the socket of
every worker that was sent nothing for ``destination_idle_s`` and has no open request
here: ``destinations_closed{idle}``, and what it still queued ``dropped{destination_idle}``.
A worker's socket is made again on its next row. At most ``max_destinations`` sockets
exist; one more closes the longest idle (``destinations_closed{cap}``). The router's
``outputs`` is never closed as idle.

Observability: :meth:`Detokenizer.run` sets up tracing (``switchboard-detokenizer``,
instance ``detokenizer-<index>``) and shuts it down on the way out. A token batch whose
header carries ``row_traces`` is handled in one ``detokenizer detokenize_batch`` span, and
each text row keeps its token row's trace context. What reaches a worker is counted by
the worker on receipt (route ``backward``, the same in both output modes).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Sequence

import zmq

from router_core import tracing
from router_core.beacon import IncarnationBeacon
from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.inbound import Handler, drain
from router_core.loop import LoopResources, PollLoop
from router_core.transport import FrameLike
from router_core.wire import Header, Kind, WireError
from router_core.wire.codec import decode_payload, frame_batch
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.regroup import regroup
from router_core.wire.split import (
    BatchShapeError,
    check_batch_shape,
    combine_rows,
    group_by_destination,
)
from switchboard.counter_export import SYNC_INTERVAL_S, CounterExport
from switchboard.detokenizer.rows import RowDetokenizer
from switchboard.detokenizer.settings import DetokenizerSettings
from switchboard.process_export import ProcessUsageExport
from switchboard.text import load_tokenizer

__all__ = ["Detokenizer"]

logger = logging.getLogger(__name__)

#: The span around one token batch's handling.
DETOKENIZE_SPAN = "detokenizer detokenize_batch"

#: A text row and its trace context (``""`` when untraced).
_TracedRow = tuple[BatchStrOutput, str]


class Detokenizer:
    """Runs in one thread: :meth:`run` binds, loops until stopped, and closes."""

    def __init__(
        self,
        settings: DetokenizerSettings,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self.settings = settings
        self._context = context
        self.counters = Counters()
        self._loop = PollLoop()
        self._rows: RowDetokenizer | None = None
        self._destinations: DestinationSet | None = None
        #: Per owner, the rids that kept decoding state after their last row: a superset
        #: of the owner's open requests (states evicted meanwhile are pruned at the sweep).
        self._open_rids: dict[str, set[str]] = {}
        self._next_evict = 0.0
        self._export: CounterExport | None = None
        self._usage: ProcessUsageExport | None = None
        self._next_export = 0.0
        #: This incarnation, told to the tokenizer router each second (when it has one).
        self._beacon = IncarnationBeacon(f"detokenizer-{settings.index}", key=settings.key)
        self._beacon_to: Destination | None = None
        self._handlers: dict[Kind, Handler] = {
            Kind.TOKEN_BATCH: self._on_tokens,
            Kind.EMBEDDING_BATCH: self._pass_through,
            Kind.FREEZE_GC: self._on_freeze_gc,
            Kind.IDLE: self._on_idle,
        }

    @property
    def open_requests(self) -> int:
        """Requests with decoding state."""
        return 0 if self._rows is None else len(self._rows)

    @property
    def open_destinations(self) -> int:
        """Sockets to workers (or to the router) currently open or queued for."""
        return 0 if self._destinations is None else len(self._destinations)

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Set up tracing, load the tokenizer, bind, serve until stopped, drain and close."""
        settings = self.settings
        tracing.setup("detokenizer", f"detokenizer-{settings.index}")
        try:
            self._serve()
        finally:
            tracing.shutdown()

    def _serve(self) -> None:
        settings = self.settings
        self._export = CounterExport("detokenizer")
        self._usage = ProcessUsageExport("detokenizer", f"detokenizer-{settings.index}")
        tokenizer = settings.tokenizer or load_tokenizer()
        self._rows = RowDetokenizer(
            tokenizer,
            holdback_chars=settings.holdback_chars,
            ttl_s=settings.state_ttl_s,
            max_states=settings.max_states,
            counters=self.counters,
        )
        try:
            with LoopResources(settings, self.counters, self._context) as resources:
                destinations = resources.destinations()
                destinations.max_destinations = settings.max_destinations
                self._destinations = destinations
                if settings.router_workers is not None:  # a set of its own: never idle-closed
                    self._beacon_to = resources.destinations().get(
                        "router-workers", settings.router_workers
                    )
                inbound = resources.bind(zmq.PULL, settings.endpoint)
                self._loop.watch(inbound, lambda: drain(inbound, self._handle, self.counters))
                logger.info(
                    "detokenizer serving %s in pid %d, outputs to %s",
                    settings.endpoint,
                    os.getpid(),
                    settings.outputs_to,
                )
                self._loop.run(resources.backlogged, self._tick)
        finally:
            self._export.sync(self.counters)
            logger.info("detokenizer stopped: %s", self.counters.snapshot())

    def _tick(self, now: float) -> float:
        if now >= self._next_evict:
            assert self._rows is not None
            self._rows.evict(now)
            self._close_idle_destinations(now)
            self._next_evict = now + self.settings.evict_interval_s
        if now >= self._next_export:
            assert self._export is not None and self._usage is not None
            self._export.sync(self.counters)
            self._usage.sync()
            self._next_export = now + SYNC_INTERVAL_S
        if self._beacon_to is not None:
            beacon = self._beacon.due(now)
            to = self._beacon_to
            if beacon is not None and not to.backlog and to.send(beacon):
                self.counters.add("beacons", "sent")
            return min(self._next_evict, self._next_export, self._beacon.next_due())
        return min(self._next_evict, self._next_export)

    def _close_idle_destinations(self, now: float) -> None:
        """Prune :attr:`_open_rids` to the states still held, then close the sockets idle
        for ``destination_idle_s`` whose owner has none of them."""
        rows, open_rids = self._rows, self._open_rids
        assert rows is not None and self._destinations is not None
        for owner, rids in list(open_rids.items()):
            held = {rid for rid in rids if (owner, rid) in rows}
            if held:
                open_rids[owner] = held
            else:
                del open_rids[owner]
        router = self.settings.router_outputs
        closed = self._destinations.close_idle(
            now,
            self.settings.destination_idle_s,
            lambda name: name == router or name in open_rids,
        )
        if closed:
            logger.info("closed the sockets of %d idle worker(s): %s", len(closed), closed)

    def _handle(self, header: Header, frames: list[FrameLike]) -> None:
        """One validated inbound message, by its kind's handler; any other kind is
        rejected (``unexpected_kind``)."""
        handle = self._handlers.get(header.kind)
        if handle is None:
            self.counters.add("rejected", "unexpected_kind")
            return
        handle(header, frames)

    def _on_tokens(self, header: Header, frames: list[FrameLike]) -> None:
        """``TOKEN_BATCH``: every row to text, sent on per owner (or to the router)."""
        with tracing.batch_span_if_traced(DETOKENIZE_SPAN, header.row_traces):
            self._detokenize(header, frames)

    def _on_freeze_gc(self, header: Header, frames: list[FrameLike]) -> None:
        """``FREEZE_GC``: freeze here, then pass it on towards the workers."""
        gc.freeze()
        self.counters.add("freeze_gc", "applied")
        self._forward_freeze_gc(frames)

    def _on_idle(self, header: Header, frames: list[FrameLike]) -> None:
        """``IDLE``: nothing to decode; counted."""
        self.counters.add("idle_batches", "inbound")

    def _detokenize(self, header: Header, frames: list[FrameLike]) -> None:
        assert self._rows is not None
        now = time.monotonic()
        traces = header.row_traces or [""] * len(header.rids)
        states, open_rids = self._rows, self._open_rids
        by_owner: dict[str, list[_TracedRow]] = {}
        for index, (rid, owner) in enumerate(zip(header.rids, header.reply_to, strict=True)):
            row = self._decode_row(rid, frames[index + 1])
            if row is not None:
                text = states.text_row(row, owner, now)
                if (owner, rid) in states:
                    open_rids.setdefault(owner, set()).add(rid)
                elif owner in open_rids:
                    open_rids[owner].discard(rid)
                if text is not None:  # None: a later row of a request aborted here
                    by_owner.setdefault(owner, []).append((text, traces[index]))
        if self.settings.outputs_to == "router":
            assert self.settings.router_outputs is not None
            rows = [row for group in by_owner.values() for row in group]
            self._send(self.settings.router_outputs, rows, header)
        else:
            for owner, group in by_owner.items():
                self._send(owner, group, header)

    def _forward_freeze_gc(self, frames: list[FrameLike]) -> None:
        """Pass freeze-GC on to the workers: through the router (which tells every
        registered worker), or straight to each worker this detokenizer has served."""
        assert self._destinations is not None
        if self.settings.outputs_to == "router":
            assert self.settings.router_outputs is not None
            targets = [self.settings.router_outputs]
        else:
            targets = [destination.name for destination in self._destinations]
        for target in targets:
            if self._destinations.send(target, frames):
                self.counters.add("freeze_gc", "forwarded")

    def _pass_through(self, header: Header, frames: list[FrameLike]) -> None:
        """``EMBEDDING_BATCH``: no text to make; the rows go on untouched, split per owner."""
        assert self._destinations is not None
        if self.settings.outputs_to == "router":
            assert self.settings.router_outputs is not None
            groups = {self.settings.router_outputs: list(range(len(header.rids)))}
        else:
            groups = group_by_destination(header.reply_to)
        for destination, rows in groups.items():
            message = regroup(header, frames, rows)
            if self._destinations.send(destination, message):
                self.counters.add("sent_rows", "embedding", len(rows))

    def _decode_row(self, rid: str, frame: FrameLike) -> BatchTokenIDOutput | None:
        data = frame.buffer if isinstance(frame, zmq.Frame) else frame
        try:
            row = decode_payload(Kind.TOKEN_BATCH, data)
            rows = check_batch_shape(row)
        except (WireError, BatchShapeError):
            self.counters.add("rejected", "bad_payload")
            return None
        if not isinstance(row, BatchTokenIDOutput) or rows != 1 or row.rids[0] != rid:
            self.counters.add("rejected", "bad_payload")
            return None
        return row

    def _send(self, destination: str, rows: Sequence[_TracedRow], header: Header) -> None:
        """Send ``rows`` to ``destination`` as one batch (one per row if their columns
        differ), each row with its trace context."""
        if not rows:
            return
        try:
            batches = [(combine_rows(BatchStrOutput, [row for row, _ in rows]), rows)]
        except BatchShapeError:  # rows with different columns: one message each
            batches = [(row, [(row, trace)]) for row, trace in rows]
        assert self._destinations is not None
        for batch, members in batches:
            frames = frame_batch(
                batch,
                traceparent=header.traceparent,
                tracestate=header.tracestate,
                row_traces=[trace for _, trace in members],
            )
            if self._destinations.send(destination, frames):
                self.counters.add("sent_rows", self.settings.outputs_to, len(batch.rids))
