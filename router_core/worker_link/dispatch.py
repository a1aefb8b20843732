"""What a worker link does with each inbound message: pure logic, no sockets (no zmq).

Every message reaches a worker on its one PULL: output rows from the detokenizers (or
the router) and control messages from the router. :func:`router_core.inbound.accept`
validates the header and the frame count against :func:`worker_frame_count` (a batch
carries one frame per row, any other kind exactly one payload frame), then
:meth:`InboundDispatch.on_message` applies the message:

* a batch (``TOKEN_BATCH``, ``STR_BATCH``, ``EMBEDDING_BATCH``): each row goes to its
  request's :class:`~router_core.worker_link.streams.ResponseStream`;
* a control kind: its payload is decoded and applied by the handler of its struct type
  (``RegistrationReply``, ``PauseContinueBroadcast``, ``DrainCommand``, ``LoadSnapshot``,
  ``FreezeGC``); what the session answers goes out through ``send_control``.

A registration reply from a newer router incarnation than the one the worker knew
(the router restarted) calls ``on_router_restart``: requests sent to the old router that
have had no row yet may have died with it, and the link sends them again (the engine's
link drops a copy of a request it already has).

Any other kind (a payload type with no handler) is counted under ``rejected`` as
``unexpected_kind``; a payload or row that does not decode is counted with the codec's
reason, a row for another request as ``bad_row``, a row for no open stream under
``dropped`` as ``unknown_request``.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from router_core import tracing
from router_core.counters import Counters
from router_core.identifiers import shown
from router_core.traffic import message_bytes
from router_core.wire import BATCH_KINDS, Header, Kind, WireError, decode_payload
from router_core.wire.codec import PAYLOAD_TYPES, Frames
from router_core.wire.control import (
    DrainCommand,
    FreezeGC,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
    UpstreamIncarnation,
)
from router_core.wire.finish import lost_reason
from router_core.worker_link.idle import suspect_streams
from router_core.worker_link.session import WorkerSession
from router_core.worker_link.streams import (
    ROWS_LOST_CAUSE,
    OutputRow,
    ResponseStream,
    finish_reason_of,
)

if TYPE_CHECKING:
    from router_core.inbound import Handler
    from router_core.transport import FrameLike

__all__ = ["RECEIVE_SPAN", "InboundDispatch", "OutputsObserver", "worker_frame_count"]

logger = logging.getLogger(__name__)

#: Called per inbound output message with (hop latency in seconds or None, rows, bytes).
OutputsObserver = Callable[[float | None, int, int], None]

#: The span a worker makes around an inbound output message with traced rows.
RECEIVE_SPAN: Final = "worker receive_outputs"

#: How a stream lost to an engine restart ends (its abort row's message).
ENGINE_RESTARTED: Final = "the engine restarted; the request was lost"


def lost_cause(row: OutputRow) -> str | None:
    """The cause of a row's lost abort (its ``err_type``), or None for any other row."""
    reason = finish_reason_of(row)
    if reason is None or reason.get("type") != "abort" or "status_code" not in reason:
        return None
    cause = reason.get("err_type")
    return cause if isinstance(cause, str) else "lost"


def worker_frame_count(header: Header) -> int:
    """Payload frames a worker accepts after ``header``: one per row for a batch, else one.

    Unlike the wire's rule, an ``IDLE`` (no payload) is not valid here: no worker is
    sent one, so a bare ``IDLE`` header is a frame-count error.
    """
    return len(header.rids) if header.kind in BATCH_KINDS else 1


def handlers_by_kind(
    by_payload: Mapping[type[msgspec.Struct], Callable[[Any], None]],
) -> dict[Kind, Callable[[Any], None]]:
    """The kinds whose payload struct has a handler in ``by_payload``, each with it."""
    table = {kind: by_payload[t] for kind, t in PAYLOAD_TYPES.items() if t in by_payload}
    unwired = set(by_payload) - {PAYLOAD_TYPES[kind] for kind in table}
    if unwired:
        raise ValueError(f"no message kind carries {sorted(t.__name__ for t in unwired)}")
    return table


class InboundDispatch:
    """Applies validated inbound messages to a worker's session and open streams.

    ``streams`` is the link's own map of open streams (shared, not copied).
    ``send_control`` sends one control message to the router; ``on_change`` runs after
    a registration reply, pause broadcast or drain command (admission may have opened,
    the reported state may have changed); ``on_outputs`` observes each output message
    after its rows are delivered (see :data:`OutputsObserver`).
    """

    def __init__(
        self,
        session: WorkerSession,
        streams: Mapping[str, ResponseStream],
        counters: Counters,
        *,
        send_control: Callable[[Frames], object],
        on_change: Callable[[], None],
        on_outputs: OutputsObserver | None = None,
        on_router_restart: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._streams = streams
        self._on_router_restart = on_router_restart
        self._counters = counters
        self._send_control = send_control
        self._on_change = on_change
        self._on_outputs_observed = on_outputs
        #: The control table: one handler per payload struct type.
        self.payload_handlers: dict[type[msgspec.Struct], Callable[[Any], None]] = {
            RegistrationReply: self._on_registration_reply,
            PauseContinueBroadcast: self._on_pause_broadcast,
            DrainCommand: self._on_drain,
            LoadSnapshot: self._on_load,
            FreezeGC: self._on_freeze_gc,
            UpstreamIncarnation: self._on_upstream,
        }
        self._kinds: dict[Kind, Handler] = dict.fromkeys(BATCH_KINDS, self._on_outputs)
        for kind in handlers_by_kind(self.payload_handlers):
            self._kinds[kind] = self._on_control

    def on_message(self, header: Header, frames: list[FrameLike]) -> None:
        """Apply one message that :func:`~router_core.inbound.accept` validated."""
        handle = self._kinds.get(header.kind)
        if handle is None:
            self._counters.add("rejected", "unexpected_kind")
            return
        handle(header, frames)

    # ------------------------------------------------------------------ output rows

    def _on_outputs(self, header: Header, frames: list[FrameLike]) -> None:
        """``[header, row_0, ..., row_n]``: each row to its request's stream."""
        observe = self._on_outputs_observed
        # Stamped before the rows are delivered: the hop ends at receipt.
        received_ns = time.time_ns() if observe is not None else 0
        kind, streams, counters = header.kind, self._streams, self._counters
        with tracing.batch_span_if_traced(RECEIVE_SPAN, header.row_traces):
            # The per-row work is written out here, not called: it runs for every row.
            for rid, frame in zip(header.rids, frames[1:], strict=True):
                stream = streams.get(rid)
                if stream is None:
                    counters.add("dropped", "unknown_request")
                    continue
                data = frame if isinstance(frame, bytes) else frame.buffer
                try:
                    row: Any = decode_payload(kind, data)
                except WireError as exc:
                    counters.add("rejected", exc.reason)
                    continue
                if not isinstance(row, OutputRow) or row.rids != [rid]:
                    counters.add("rejected", "bad_row")
                    continue
                self._session.rows_received += 1
                if stream.put(row) and stream.finished:
                    self._count_finish(stream, row)
        if observe is not None:
            latency_s = max(0.0, (received_ns - header.sent_ns) / 1e9) if header.sent_ns else None
            try:
                observe(latency_s, len(header.rids), message_bytes(frames))
            except Exception:  # an observer's bug must not cost the rows that follow
                logger.exception("worker link: the outputs observer failed")
                counters.add("observer_errors", "on_outputs")

    def _count_finish(self, stream: ResponseStream, row: OutputRow) -> None:
        """Mark and count a request lost to a fault (``lost_requests`` by cause) as it
        finishes: a gap this stream found, or a lost abort that came in a row."""
        cause = ROWS_LOST_CAUSE if stream.output_gap is not None else lost_cause(row)
        if cause is not None:
            stream.lost_cause = cause
            self._counters.add("lost_requests", cause)

    def lose_inflight(self, incarnation: int, message: str) -> int:
        """End with an abort every unfinished stream whose request went to the engine
        ``incarnation`` (or before any was known): that engine is gone, and the request
        with it. Returns how many streams ended."""
        lost = 0
        for stream in self._streams.values():
            if not stream.finished and stream.engine_incarnation in (0, incarnation):
                stream.close(lost_reason("engine_restarted", message))
                stream.lost_cause = "engine_restarted"
                lost += 1
        if lost:
            logger.warning("worker link: %d requests in flight lost: %s", lost, message)
            self._counters.add("lost_requests", "engine_restarted", lost)
        return lost

    # ------------------------------------------------------------------ control

    def _on_control(self, header: Header, frames: list[FrameLike]) -> None:
        """``[header, payload]``: decode the payload and apply it by its struct type."""
        frame = frames[1]
        try:
            payload = decode_payload(
                header.kind, frame if isinstance(frame, bytes) else frame.buffer
            )
        except WireError as exc:
            self._counters.add("rejected", exc.reason)
            return
        self.payload_handlers[type(payload)](payload)

    def _answer(self, replies: list[Frames]) -> None:
        for frames in replies:
            self._send_control(frames)
        self._on_change()

    def _on_registration_reply(self, reply: RegistrationReply) -> None:
        """The router accepted or refused us (a refusal: register again at once); a newer
        router incarnation is a restart."""
        restarts = self._session.router_restarts
        refused_before = self._session.refusal
        replies = self._session.on_registration_reply(reply)
        self._counters.add("registration_replies", "accepted" if reply.accepted else "refused")
        if self._session.refusal and not refused_before:  # once per refused spell
            logger.error(
                "worker link: the router refuses this worker (%s): it needs the stack's "
                "key; give the worker the stack's --run-dir or --key-file",
                shown(self._session.refusal),
            )
        self._answer(replies)
        if self._session.router_restarts != restarts:
            self._counters.add("router_restarts", "seen")
            # With outputs through the router, rows died with it too: a producing stream
            # must show a row within the grace, as after any output-path restart.
            suspect_streams(
                self._streams.values(), now=time.monotonic(), process="tokenizer-router"
            )
            if self._on_router_restart is not None:
                self._on_router_restart()

    def _on_pause_broadcast(self, op: PauseContinueBroadcast) -> None:
        """A pause or continue, acknowledged whether or not it was newer than ours."""
        replies = self._session.on_pause_broadcast(op)
        self._counters.add("pause_broadcasts", "pause" if op.is_pause else "continue")
        self._answer(replies)

    def _on_drain(self, command: DrainCommand) -> None:
        """Start or stop draining (nothing is sent back; the next heartbeat reports it)."""
        self._session.on_drain(command)
        self._counters.add("drain_commands", "drain" if command.drain else "undrain")
        self._answer([])

    def _on_load(self, snapshot: LoadSnapshot) -> None:
        """A newer engine load; a new engine incarnation loses what the old one had."""
        before = self._session.engine_incarnation
        if self._session.on_load(snapshot):
            self.lose_inflight(before, ENGINE_RESTARTED)

    def _on_upstream(self, news: UpstreamIncarnation) -> None:
        """An output-path process's incarnation; a restart makes every producing stream
        a suspect (:func:`~router_core.worker_link.idle.suspect_streams`)."""
        if not self._session.on_upstream(news):
            return
        marked = suspect_streams(self._streams.values(), now=time.monotonic(), process=news.process)
        self._counters.add("upstream_restarts", "seen")
        if marked:
            logger.warning(
                "worker link: %s restarted; %d requests must show output within the grace",
                shown(news.process),
                marked,
            )

    def _on_freeze_gc(self, command: FreezeGC) -> None:
        """The long-lived objects made so far need no more collection passes."""
        gc.freeze()
        self._counters.add("freeze_gc", "applied")
