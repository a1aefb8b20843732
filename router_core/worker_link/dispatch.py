"""The worker link's inbound core: decoded messages and the time in, effects out.

Every message reaches a worker on its one PULL: output rows from the detokenizers (or
the router) and control messages from the router. :func:`router_core.inbound.accept`
validates the header and the frame count against :func:`worker_frame_count` (a batch
carries one frame per row, any other kind exactly one payload frame), then the shell
hands the message, with the :class:`~router_core.worker_link.effects.Instant` it was
read at, to :meth:`InboundDispatch.on_message`, which applies it to the session and the
open streams and returns the effects for the shell to carry out:

* a batch (``TOKEN_BATCH``, ``STR_BATCH``, ``EMBEDDING_BATCH``): each row goes to its
  request's :class:`~router_core.worker_link.streams.ResponseStream`; one
  :class:`~router_core.worker_link.effects.OutputsReceived` reports the message;
* a control kind: its payload is decoded and applied by the handler of its struct type
  (``RegistrationReply``, ``PauseContinueBroadcast``, ``DrainCommand``, ``LoadSnapshot``,
  ``FreezeGC``, ``UpstreamIncarnation``); what the session answers is a
  :class:`~router_core.worker_link.effects.Send` on the control channel, and a change
  of registration, pause or drain state a ``SessionChanged``.

A registration reply from a newer router incarnation than the one the worker knew
(the router restarted) sends again every request that has had no row yet: it may have
died with the old router (the engine's link drops a copy of a request it already has).

Any other kind (a payload type with no handler) is counted under ``rejected`` as
``unexpected_kind``; a payload or row that does not decode is counted with the codec's
reason, a row for another request as ``bad_row``, a row for no open stream under
``dropped`` as ``unknown_request``. Pure: no sockets, no clock but the one passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

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
from router_core.worker_link.effects import (
    Effect,
    FreezeGarbageCollector,
    Instant,
    OutputsReceived,
    Send,
    SessionChanged,
)
from router_core.worker_link.idle import suspect_streams
from router_core.worker_link.session import WorkerSession
from router_core.worker_link.streams import (
    ROWS_LOST_CAUSE,
    OutputRow,
    ResponseStream,
    finish_reason_of,
)

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = [
    "ENGINE_RESTARTED",
    "RECEIVE_SPAN",
    "InboundDispatch",
    "OutputsObserver",
    "handlers_by_kind",
    "worker_frame_count",
]

logger = logging.getLogger(__name__)

#: Called per inbound output message with (hop latency in seconds or None, rows, bytes).
OutputsObserver = Callable[[float | None, int, int], None]

#: The span a worker makes around an inbound output message with traced rows.
RECEIVE_SPAN: Final = "worker receive_outputs"

#: How a stream lost to an engine restart ends (its abort row's message).
ENGINE_RESTARTED: Final = "the engine restarted; the request was lost"

#: What re-sending a request after a router restart counts, sent or not.
RESENT: Final = ("resent_requests", "router_restarted")
RESEND_FAILED: Final = ("resend_failed", "router_restarted")

#: A control handler: the decoded payload and the time, the effects it asks for.
PayloadHandler = Callable[[Any, Instant], list[Effect]]
#: A kind's handler: the validated message and the time, the effects it asks for.
MessageHandler = Callable[[Header, "list[FrameLike]", Instant], list[Effect]]


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
    by_payload: Mapping[type[msgspec.Struct], PayloadHandler],
) -> dict[Kind, PayloadHandler]:
    """The kinds whose payload struct has a handler in ``by_payload``, each with it."""
    table = {kind: by_payload[t] for kind, t in PAYLOAD_TYPES.items() if t in by_payload}
    unwired = set(by_payload) - {PAYLOAD_TYPES[kind] for kind in table}
    if unwired:
        raise ValueError(f"no message kind carries {sorted(t.__name__ for t in unwired)}")
    return table


def control_sends(replies: list[Frames]) -> list[Effect]:
    """The session's answers, sent on the control channel, then the change they signal."""
    effects: list[Effect] = [Send("control", frames) for frames in replies]
    effects.append(SessionChanged())
    return effects


class InboundDispatch:
    """Applies validated inbound messages to a worker's session and open streams.

    ``streams`` is the link's own map of open streams (shared, not copied): the shell
    opens and closes them, this core puts rows in them and ends them.
    """

    def __init__(
        self,
        session: WorkerSession,
        streams: Mapping[str, ResponseStream],
        counters: Counters,
    ) -> None:
        self._session = session
        self._streams = streams
        self._counters = counters
        #: The control table: one handler per payload struct type.
        self.payload_handlers: dict[type[msgspec.Struct], PayloadHandler] = {
            RegistrationReply: self._on_registration_reply,
            PauseContinueBroadcast: self._on_pause_broadcast,
            DrainCommand: self._on_drain,
            LoadSnapshot: self._on_load,
            FreezeGC: self._on_freeze_gc,
            UpstreamIncarnation: self._on_upstream,
        }
        self._kinds: dict[Kind, MessageHandler] = dict.fromkeys(BATCH_KINDS, self._on_outputs)
        for kind in handlers_by_kind(self.payload_handlers):
            self._kinds[kind] = self._on_control

    def on_message(self, header: Header, frames: list[FrameLike], at: Instant) -> list[Effect]:
        """Apply one message that :func:`~router_core.inbound.accept` validated, read at
        ``at``; the effects it asks for, in order."""
        handle = self._kinds.get(header.kind)
        if handle is None:
            self._counters.add("rejected", "unexpected_kind")
            return []
        return handle(header, frames, at)

    # ------------------------------------------------------------------ output rows

    def _on_outputs(self, header: Header, frames: list[FrameLike], at: Instant) -> list[Effect]:
        """``[header, row_0, ..., row_n]``: each row to its request's stream."""
        kind, streams, counters, now = header.kind, self._streams, self._counters, at.mono
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
            if stream.put(row, now) and stream.finished:
                self._count_finish(stream, row)
        # The hop ends at receipt: ``at`` was taken as the message was read.
        latency_s = max(0.0, at.wall - header.sent_ns / 1e9) if header.sent_ns else None
        return [OutputsReceived(latency_s, len(header.rids), message_bytes(frames))]

    def _count_finish(self, stream: ResponseStream, row: OutputRow) -> None:
        """Mark and count a request lost to a fault (``lost_requests`` by cause) as it
        finishes: a gap this stream found, or a lost abort that came in a row."""
        cause = ROWS_LOST_CAUSE if stream.output_gap is not None else lost_cause(row)
        if cause is not None:
            stream.lost_cause = cause
            self._counters.add("lost_requests", cause)

    def lose_inflight(self, incarnation: int, message: str, at: Instant) -> int:
        """End with an abort every unfinished stream whose request went to the engine
        ``incarnation`` (or before any was known): that engine is gone, and the request
        with it. Returns how many streams ended."""
        lost = 0
        for stream in self._streams.values():
            if not stream.finished and stream.engine_incarnation in (0, incarnation):
                stream.close(lost_reason("engine_restarted", message), at.mono)
                stream.lost_cause = "engine_restarted"
                lost += 1
        if lost:
            logger.warning("worker link: %d requests in flight lost: %s", lost, message)
            self._counters.add("lost_requests", "engine_restarted", lost)
        return lost

    # ------------------------------------------------------------------ control

    def _on_control(self, header: Header, frames: list[FrameLike], at: Instant) -> list[Effect]:
        """``[header, payload]``: decode the payload and apply it by its struct type."""
        frame = frames[1]
        try:
            payload = decode_payload(
                header.kind, frame if isinstance(frame, bytes) else frame.buffer
            )
        except WireError as exc:
            self._counters.add("rejected", exc.reason)
            return []
        return self.payload_handlers[type(payload)](payload, at)

    def _on_registration_reply(self, reply: RegistrationReply, at: Instant) -> list[Effect]:
        """The router accepted or refused us (a refusal: register again at once); a newer
        router incarnation is a restart."""
        session = self._session
        restarts, refused_before = session.router_restarts, session.refusal
        effects = control_sends(session.on_registration_reply(reply))
        self._counters.add("registration_replies", "accepted" if reply.accepted else "refused")
        if session.refusal and not refused_before:  # once per refused spell
            logger.error(
                "worker link: the router refuses this worker (%s): it needs the stack's "
                "key; give the worker the stack's --run-dir or --key-file",
                shown(session.refusal),
            )
        if session.router_restarts != restarts:
            self._counters.add("router_restarts", "seen")
            # With outputs through the router, rows died with it too: a producing stream
            # must show a row within the grace, as after any output-path restart.
            suspect_streams(self._streams.values(), now=at.mono, process="tokenizer-router")
            effects += self._resend_unanswered()
        return effects

    def _resend_unanswered(self) -> list[Effect]:
        """Every request no row has answered yet, sent again: it may have died in the old
        router (the engine link drops a copy it has)."""
        return [
            Send("requests", stream.sent, sent=RESENT, unsent=RESEND_FAILED)
            for stream in self._streams.values()
            if stream.sent is not None and not stream.finished
        ]

    def _on_pause_broadcast(self, op: PauseContinueBroadcast, at: Instant) -> list[Effect]:
        """A pause or continue, acknowledged whether or not it was newer than ours (the
        session applies operations in ``op_order``)."""
        replies = self._session.on_pause_broadcast(op)
        self._counters.add("pause_broadcasts", "pause" if op.is_pause else "continue")
        return control_sends(replies)

    def _on_drain(self, command: DrainCommand, at: Instant) -> list[Effect]:
        """Start or stop draining (nothing is sent back; the next heartbeat reports it)."""
        self._session.on_drain(command)
        self._counters.add("drain_commands", "drain" if command.drain else "undrain")
        return [SessionChanged()]

    def _on_load(self, snapshot: LoadSnapshot, at: Instant) -> list[Effect]:
        """A newer engine load; a new engine incarnation loses what the old one had."""
        before = self._session.engine_incarnation
        if self._session.on_load(snapshot):
            self.lose_inflight(before, ENGINE_RESTARTED, at)
        return []

    def _on_upstream(self, news: UpstreamIncarnation, at: Instant) -> list[Effect]:
        """An output-path process's incarnation; a restart makes every producing stream
        a suspect (:func:`~router_core.worker_link.idle.suspect_streams`)."""
        if not self._session.on_upstream(news):
            return []
        marked = suspect_streams(self._streams.values(), now=at.mono, process=news.process)
        self._counters.add("upstream_restarts", "seen")
        if marked:
            logger.warning(
                "worker link: %s restarted; %d requests must show output within the grace",
                shown(news.process),
                marked,
            )
        return []

    def _on_freeze_gc(self, command: FreezeGC, at: Instant) -> list[Effect]:
        """The long-lived objects made so far need no more collection passes."""
        self._counters.add("freeze_gc", "applied")
        return [FreezeGarbageCollector()]
