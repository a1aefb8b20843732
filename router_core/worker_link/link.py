"""The worker link: what an HTTP worker uses to take part in a Switchboard stack.

A worker binds one PULL at its return address, where the router and the detokenizers
send it everything (registration replies, pause broadcasts, drain commands, load
snapshots, output rows), and connects two PUSHes to the tokenizer router: ``requests``
(generate, embed, abort) and ``workers`` (registration, heartbeats, acknowledgements,
deregistration). :class:`WorkerLink` owns the three sockets and runs two tasks on the
caller's asyncio loop: a reader that applies inbound messages, and a timer that
registers until accepted and heartbeats at the interval the router names (and at once on
every change of state).

Serving a request::

    await link.wait_admission()            # waits while paused; raises when draining
    with link.open_stream(rid) as stream:  # in flight from here; aborted if left early
        await link.send_request(Kind.GENERATE, request)
        while not stream.finished:
            row = await stream.next_row()

One event loop uses a link; it is not thread-safe. Inbound messages that break the
protocol are counted in ``link.counters`` under ``rejected`` and skipped, never raised.

Observability without HTTP or metric libraries here: ``on_outputs`` is called once per
inbound output message with its hop latency (seconds from the sender's ``sent_ns``; None
if the sender did not stamp it), its row count and its size in bytes (every frame); and
with tracing on, a message whose header carries ``row_traces`` is handled inside one
``worker receive_outputs`` span (:func:`router_core.tracing.batch_span`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Final

import msgspec
import zmq

from router_core import tracing
from router_core.counters import Counters
from router_core.inbound import BUDGET
from router_core.traffic import message_bytes
from router_core.transport import (
    FrameLike,
    MalformedMessage,
    bind,
    close_bound,
    connect,
    recv_message,
    send_frames,
)
from router_core.wire import BATCH_KINDS, Header, Kind, WireError, decode_header, decode_payload
from router_core.wire.codec import Frames, frame_message
from router_core.wire.control import (
    DrainCommand,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
)
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.settings import WorkerLinkSettings
from router_core.worker_link.streams import OutputRow, ResponseStream

__all__ = ["RECEIVE_SPAN", "AdmissionRefused", "OutputsObserver", "RouterUnavailable", "WorkerLink"]

logger = logging.getLogger(__name__)

#: Kinds whose single payload the session applies.
_CONTROL_KINDS: Final = frozenset(
    {Kind.REGISTER_REPLY, Kind.PAUSE_BROADCAST, Kind.DRAIN, Kind.LOAD, Kind.FREEZE_GC}
)


#: Called per inbound output message with (hop latency in seconds or None, rows, bytes).
OutputsObserver = Callable[[float | None, int, int], None]

#: The span a worker makes around an inbound output message with traced rows.
RECEIVE_SPAN: Final = "worker receive_outputs"

#: The first registration retry; later ones back off to ``settings.register_retry_s``.
FIRST_REGISTER_RETRY_S: Final = 0.05


class AdmissionRefused(Exception):
    """A request cannot be admitted; ``reason`` is ``draining``, ``stopping`` or
    ``not_registered`` (the router did not accept the worker within the wait)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RouterUnavailable(Exception):
    """The router did not take a request within ``send_timeout_s`` (it is down or full)."""


class WorkerLink:
    """A worker's three sockets and its session; opened by :meth:`open` or ``async with``.

    ``on_outputs`` observes every inbound output message (see the module docstring); it
    runs on the loop, after the message's rows are delivered, and must not block.
    """

    def __init__(
        self,
        settings: WorkerLinkSettings,
        identity: WorkerIdentity,
        *,
        on_outputs: OutputsObserver | None = None,
    ) -> None:
        if identity.address != settings.address:
            raise ValueError("identity.address must be the settings' address")
        self.settings = settings
        self._on_outputs = on_outputs
        self.session = WorkerSession(identity)
        self.counters = Counters()
        self._streams: dict[str, ResponseStream] = {}
        self._admission = asyncio.Event()
        self._state_changed = asyncio.Event()
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox_fd: int | None = None
        self._inbox: zmq.Socket[bytes] | None = None
        self._requests: zmq.Socket[bytes] | None = None
        self._control: zmq.Socket[bytes] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._reported_state = ""

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> WorkerLink:
        """Bind the inbox, connect to the router and start registering.

        Raises ``EndpointError`` for an endpoint the loopback rule refuses and
        ``zmq.ZMQError`` when binding fails.
        """
        if self._context is not None:
            raise RuntimeError("the worker link is already open")
        s = self.settings
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            self._inbox = bind(context, zmq.PULL, s.address, hwm=s.hwm, allow_remote=s.allow_remote)
            # A linger, so the aborts sent while closing still leave.
            self._requests = connect(
                context, zmq.PUSH, s.requests_endpoint, hwm=s.hwm, linger_ms=500
            )
            # Long enough for the deregistration to leave on close.
            self._control = connect(
                context, zmq.PUSH, s.workers_endpoint, hwm=s.hwm, linger_ms=1000
            )
        except BaseException:
            self._close_sockets(context)
            raise
        self._context = context
        self._loop = asyncio.get_running_loop()
        # ZMQ_FD is edge-triggered: it signals when the socket's events may have changed,
        # so the reader drains until EAGAIN (or reschedules itself) every time it runs.
        fd = int(self._inbox.getsockopt(zmq.FD))
        self._inbox_fd = fd
        self._loop.add_reader(fd, self._read_ready)
        self._loop.call_soon(self._read_ready)
        self._tasks = [asyncio.create_task(self._keep_registered(), name="worker-link-timer")]
        return self

    def begin_stopping(self) -> None:
        """Refuse new requests from now on and report ``draining``; in-flight ones go on.

        Call from the loop's thread (from a signal handler, via ``call_soon_threadsafe``).
        """
        self.session.stopping = True
        self._admission.set()
        self._report_state_change()

    async def close(self, reason: str = "shutdown") -> None:
        """Abort what is still in flight, deregister, and close; safe to call twice.

        Every unfinished request is aborted in the engine (so it stops generating for a
        client that is gone) and its stream ends with an abort row, so a handler still
        running answers its client instead of hanging.
        """
        if self._context is None:
            return
        self.session.stopping = True
        self._admission.set()
        for task in self._tasks:
            task.cancel()
        # The timer never swallows its cancellation (it waits with asyncio.timeout), but a
        # close must not hang on it whatever happens.
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=1.0)
        self._tasks.clear()
        for rid, stream in list(self._streams.items()):
            if not stream.finished:
                self.abort(rid, reason="shutdown")
                stream.close({"type": "abort", "message": "worker shutting down"})
        if self.session.registered:
            self._send_control(self.session.deregistration(reason))
        context, self._context = self._context, None
        self._close_sockets(context)

    def _close_sockets(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        if self._loop is not None and self._inbox_fd is not None:
            self._loop.remove_reader(self._inbox_fd)
        self._inbox_fd = None
        if self._inbox is not None:
            close_bound(self._inbox, self.settings.address)
        for sock in (self._requests, self._control):
            if sock is not None:
                sock.close()
        self._inbox = self._requests = self._control = None
        context.term()

    async def __aenter__(self) -> WorkerLink:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ views

    @property
    def load(self) -> LoadSnapshot | None:
        """The newest engine load snapshot the router forwarded (no round trip)."""
        return self.session.load

    @property
    def inflight(self) -> int:
        """Requests admitted and not yet finished."""
        return len(self.session.inflight)

    def status(self) -> dict[str, Any]:
        """State, pause mode, in-flight count, latest load and counters, as plain data."""
        session = self.session
        return {
            "worker_id": session.worker_id,
            "address": session.identity.address,
            "state": session.state,
            "registered": session.registered,
            "paused": session.paused,
            "pause_mode": session.pause_mode,
            "draining": session.draining,
            "inflight": len(session.inflight),
            "load": None if session.load is None else msgspec.structs.asdict(session.load),
            "counters": self.counters.snapshot(),
        }

    # ------------------------------------------------------------------ requests

    async def wait_admission(self) -> None:
        """Return once a new request may be sent; wait while paused, without a limit.

        Raises :class:`AdmissionRefused` at once when draining or stopping (also when
        draining starts during the wait), and with ``not_registered`` when the router has
        not accepted this worker within ``settings.register_wait_s``.
        """
        session = self.session
        deadline = time.monotonic() + self.settings.register_wait_s
        while not session.admitting:
            if session.stopping:
                raise AdmissionRefused("stopping")
            if session.draining:
                raise AdmissionRefused("draining")
            self._admission.clear()
            if session.registered:
                await self._admission.wait()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AdmissionRefused("not_registered")
            await _wait_event(self._admission, remaining)

    def has_stream(self, rid: str) -> bool:
        """Whether ``rid`` is in flight here (a new request may not reuse it)."""
        return rid in self._streams

    @contextlib.contextmanager
    def open_stream(self, rid: str) -> Iterator[ResponseStream]:
        """Count ``rid`` in flight and route its rows to the yielded stream.

        On exit the request leaves the in-flight set; if its stream has not finished (the
        client went away, or an error), an ABORT is sent so the engine stops it. Raises
        ``ValueError`` if ``rid`` is already in flight here.
        """
        if rid in self._streams:
            raise ValueError(f"request id {rid!r} is already in flight")
        stream = ResponseStream(rid)
        self._streams[rid] = stream
        self.session.inflight.add(rid)
        try:
            yield stream
        finally:
            del self._streams[rid]
            self.session.inflight.discard(rid)
            if not stream.finished and self._context is not None:
                self.abort(rid)
            self._report_state_change()

    async def send_request(
        self,
        kind: Kind,
        request: GenerateRequest | EmbeddingRequest,
        *,
        traceparent: str = "",
        tracestate: str = "",
    ) -> None:
        """Send a GENERATE or EMBED request; wait (up to ``send_timeout_s``) while the
        router cannot take it. Raises :class:`RouterUnavailable` at the deadline."""
        frames = frame_message(
            kind,
            request,
            rids=[request.rid],
            reply_to=[self.settings.address],
            traceparent=traceparent,
            tracestate=tracestate,
        )
        sock = self._requests
        if sock is None:
            raise RouterUnavailable("the worker link is closed")
        stream = self._streams.get(request.rid)
        if stream is not None:
            stream.engine_incarnation = self.session.engine_incarnation
        if send_frames(sock, frames):
            self.counters.add("requests_sent", kind.name.lower())
            self.session.requests_sent += 1
            return
        # Backpressure is rare (the router reads requests as fast as the engine takes
        # them), so waiting polls with a growing pause instead of watching the socket.
        deadline = time.monotonic() + self.settings.send_timeout_s
        pause = 0.001
        while time.monotonic() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)
            if self._context is None:  # closed while waiting
                break
            if send_frames(sock, frames):
                self.counters.add("requests_sent", kind.name.lower())
                self.session.requests_sent += 1
                return
        self.counters.add("request_send_failed", "router_unavailable")
        raise RouterUnavailable(f"the router did not take {request.rid!r} in time")

    def abort(self, rid: str, reason: str = "client") -> None:
        """Ask the engine to stop ``rid`` (best effort: dropped and counted if full)."""
        frames = frame_message(
            Kind.ABORT,
            AbortRequest(rid=rid, reason=reason),
            rids=[rid],
            reply_to=[self.settings.address],
        )
        if self._requests is not None and send_frames(self._requests, frames):
            self.counters.add("aborts_sent", reason)
        else:
            self.counters.add("dropped", "abort")

    # ------------------------------------------------------------------ inbound

    def _read_ready(self) -> None:
        """Apply up to ``BUDGET`` waiting messages; reschedule if more may be waiting."""
        sock = self._inbox
        if sock is None:
            return
        for _ in range(BUDGET):
            try:
                frames = recv_message(sock)
            except zmq.Again:
                # Reading ZMQ_EVENTS re-arms the edge-triggered FD; a message that slipped
                # in meanwhile would otherwise wait for the next one.
                if not int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
                    return
                continue
            except MalformedMessage as exc:
                self.counters.add("rejected", exc.reason)
                continue
            try:
                self._on_message(frames)
            except Exception:  # never leave later messages unread behind one bad one
                logger.exception("worker link: a message could not be applied")
                self.counters.add("rejected", "handler_error")
        # A flood: let the request handlers run, then carry on draining.
        assert self._loop is not None
        self._loop.call_soon(self._read_ready)

    def _on_message(self, frames: list[FrameLike]) -> None:
        try:
            header = decode_header(_buffer(frames[0]))
        except WireError as exc:
            self.counters.add("rejected", exc.reason)
            return
        if header.kind in BATCH_KINDS:
            if len(frames) != len(header.rids) + 1:
                self.counters.add("rejected", "frame_count")
                return
            self._on_outputs_message(header, frames)
            return
        if header.kind not in _CONTROL_KINDS or len(frames) != 2:
            self.counters.add("rejected", "unexpected_kind" if len(frames) == 2 else "frame_count")
            return
        try:
            payload = decode_payload(header.kind, _buffer(frames[1]))
        except WireError as exc:
            self.counters.add("rejected", exc.reason)
            return
        self._apply(payload)

    def _apply(self, payload: msgspec.Struct) -> None:
        session = self.session
        replies: list[Frames] = []
        if isinstance(payload, RegistrationReply):
            replies = session.on_registration_reply(payload)
            self.counters.add("registration_replies", "accepted" if payload.accepted else "refused")
        elif isinstance(payload, PauseContinueBroadcast):
            replies = session.on_pause_broadcast(payload)
            self.counters.add("pause_broadcasts", "pause" if payload.is_pause else "continue")
        elif isinstance(payload, DrainCommand):
            session.on_drain(payload)
            self.counters.add("drain_commands", "drain" if payload.drain else "undrain")
        elif isinstance(payload, LoadSnapshot):
            before = session.engine_incarnation
            if session.on_load(payload):
                self._lose_inflight(before, "the engine restarted; the request was lost")
            return
        else:  # FreezeGC: the long-lived objects made so far need no more collection passes
            gc.freeze()
            self.counters.add("freeze_gc", "applied")
            return
        for frames in replies:
            self._send_control(frames)
        self._admission.set()
        self._report_state_change()

    def _on_outputs_message(self, header: Header, frames: list[FrameLike]) -> None:
        received_ns = time.time_ns()
        if header.row_traces and tracing.enabled():
            with tracing.batch_span(RECEIVE_SPAN, header.row_traces):
                for rid, frame in zip(header.rids, frames[1:], strict=True):
                    self._on_row(header.kind, rid, frame)
        else:
            for rid, frame in zip(header.rids, frames[1:], strict=True):
                self._on_row(header.kind, rid, frame)
        if self._on_outputs is not None:
            latency_s = max(0.0, (received_ns - header.sent_ns) / 1e9) if header.sent_ns else None
            nbytes = message_bytes(frames)
            try:
                self._on_outputs(latency_s, len(header.rids), nbytes)
            except Exception:  # an observer's bug must not cost the rows that follow
                logger.exception("worker link: the outputs observer failed")
                self.counters.add("observer_errors", "on_outputs")

    def _on_row(self, kind: Kind, rid: str, frame: FrameLike) -> None:
        stream = self._streams.get(rid)
        if stream is None:
            self.counters.add("dropped", "unknown_request")
            return
        try:
            row: Any = decode_payload(kind, _buffer(frame))
        except WireError as exc:
            self.counters.add("rejected", exc.reason)
            return
        if not isinstance(row, OutputRow) or row.rids != [rid]:
            self.counters.add("rejected", "bad_row")
            return
        self.session.rows_received += 1
        stream.put(row)

    def _lose_inflight(self, incarnation: int, message: str) -> None:
        """End with an abort every unfinished stream whose request went to the engine
        ``incarnation`` (or before any was known): that engine is gone, and the request
        with it."""
        lost = 0
        for stream in self._streams.values():
            if not stream.finished and stream.engine_incarnation in (0, incarnation):
                stream.close({"type": "abort", "message": message})
                lost += 1
        if lost:
            logger.warning("worker link: %d requests in flight lost: %s", lost, message)
            self.counters.add("lost_requests", "engine_restarted", lost)

    # ------------------------------------------------------------------ outbound control

    def _send_control(self, frames: Frames, *, retried: bool = False) -> None:
        """Send without blocking; what the router cannot take now is dropped and counted
        (``retried`` messages, registrations, are counted apart: they go out again)."""
        if self._control is not None and send_frames(self._control, frames):
            return
        if retried:
            self.counters.add("registration_retries", "router_not_connected")
        else:
            self.counters.add("dropped", "control")

    def _report_state_change(self) -> None:
        """Heartbeat at once when the reported state changed (e.g. draining -> drained)."""
        if self.session.registered and self.session.state != self._reported_state:
            self._state_changed.set()

    async def _keep_registered(self) -> None:
        """Register until accepted, then heartbeat; register again if the router forgets us.

        Registration retries start at 50 ms (the router is usually just starting too) and
        back off to ``register_retry_s``.
        """
        session = self.session
        next_beat = 0.0
        retry = FIRST_REGISTER_RETRY_S
        while True:
            now = time.monotonic()
            if not session.registered:
                self._send_control(session.registration(), retried=True)
                wait = retry
                retry = min(retry * 2, self.settings.register_retry_s)
            else:
                retry = FIRST_REGISTER_RETRY_S
                if now >= next_beat or session.state != self._reported_state:
                    self._reported_state = session.state
                    self._send_control(session.heartbeat())
                    next_beat = now + session.heartbeat_interval_s
                wait = max(0.0, next_beat - now)
            self._state_changed.clear()
            await _wait_event(self._state_changed, wait)


async def _wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``event`` for up to ``timeout_s``.

    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` can swallow a
    cancellation that arrives as the event is set, and a cancelled task would run on.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


def _buffer(frame: FrameLike) -> bytes | memoryview:
    return frame.buffer if isinstance(frame, zmq.Frame) else frame
