"""Drives the worker link's real inbound core in-process: real frames from the wire
codec, validated by :func:`router_core.inbound.accept` as the link's reader does, and a
clock the test sets. No sockets, no sleeps."""

from __future__ import annotations

import msgspec

from router_core.counters import Counters
from router_core.inbound import accept
from router_core.transport import FrameLike
from router_core.wire import Header, Kind, decode_header, frame_message
from router_core.wire.codec import frame_batch
from router_core.wire.control import RegistrationReply
from router_core.wire.outputs import BatchStrOutput
from router_core.worker_link.dispatch import InboundDispatch, worker_frame_count
from router_core.worker_link.effects import Effect, Instant, Send
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.streams import ResponseStream

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"


class CoreDriver:
    """An :class:`InboundDispatch` over a fresh session for worker ``w0``."""

    def __init__(self) -> None:
        identity = WorkerIdentity("w0", ADDRESS, pid=1, host="", version="", started_ns=0)
        self.session = WorkerSession(identity)
        self.streams: dict[str, ResponseStream] = {}
        self.counters = Counters()
        self.core = InboundDispatch(self.session, self.streams, self.counters)
        #: The clock handed to the core (tests move it by hand).
        self.now = Instant(mono=1000.0, wall=1_700_000_000.0)

    def receive(self, frames: list[FrameLike], at: Instant | None = None) -> list[Effect]:
        """One message, as the link's reader hands it on; the effects the core returns."""
        effects: list[Effect] = []
        when = self.now if at is None else at

        def handle(header: Header, message: list[FrameLike]) -> None:
            effects.extend(self.core.on_message(header, message, when))

        accept(list(frames), handle, self.counters, worker_frame_count)
        return effects

    def control(self, kind: Kind, payload: msgspec.Struct) -> list[Effect]:
        """A control message of ``kind`` carrying ``payload``."""
        return self.receive(list(frame_message(kind, payload)))

    def reply(self, incarnation: int = 0, *, paused: bool = False, op_id: str = "") -> list[Effect]:
        """An accepted registration reply from router ``incarnation``."""
        reply = RegistrationReply(
            worker_id="w0",
            accepted=True,
            paused=paused,
            pause_mode="in_place" if paused else None,
            op_id=op_id,
            incarnation=incarnation,
        )
        return self.control(Kind.REGISTER_REPLY, reply)

    def row(self, rid: str, text: str = "x") -> list[Effect]:
        """A one-row STR_BATCH for ``rid``."""
        batch = BatchStrOutput(rids=[rid], http_worker_ipcs=[ADDRESS], output_strs=[text])
        return self.receive(list(frame_batch(batch)))

    def open_stream(self, rid: str) -> ResponseStream:
        """A stream for ``rid``, in flight here."""
        stream = ResponseStream(rid)
        self.streams[rid] = stream
        self.session.inflight.add(rid)
        return stream

    def rejected(self) -> dict[str, int]:
        """The rejected counts by reason."""
        return dict(self.counters.snapshot().get("rejected", {}))


def sends(effects: list[Effect]) -> list[tuple[str, Kind]]:
    """The channel and kind of each send among ``effects``, in order."""
    return [
        (effect.channel, decode_header(effect.frames[0]).kind)
        for effect in effects
        if isinstance(effect, Send)
    ]
