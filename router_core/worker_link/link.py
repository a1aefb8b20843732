"""The worker link: what an HTTP worker uses to take part in a Switchboard stack.

A worker binds one PULL at its return address, where the router and the detokenizers
send it everything (registration replies, pause broadcasts, drain commands, load
snapshots, output rows), and connects two PUSHes to the tokenizer router: ``requests``
(generate, embed, abort) and ``workers`` (registration, heartbeats, acknowledgements,
deregistration). :class:`WorkerLink` runs on the caller's asyncio loop and puts together
``LinkSockets`` (the sockets, the inbox reader, the one send-and-count path),
``InboundDispatch`` (the pure core: each inbound message and the time it was read in,
effects out), ``WorkerSession`` (pure protocol state) and ``RegistrationTimer``
(registers until accepted, then heartbeats at the interval the router names, and at once
on every change of state). The link is the shell: it stamps each message with the time,
calls the core and carries out the effects it returns, in order
(:class:`~router_core.worker_link.shell.InboundShell`).

Serving a request::

    await link.wait_admission()            # waits while paused; raises when stopping
    with link.open_stream(rid) as stream:  # in flight from here; aborted if left early
        await link.send_request(Kind.GENERATE, request)
        while not stream.finished:
            row = await stream.next_row()

Faults: a request whose router restarted before any row came back is sent again (the
engine link drops the copy of one it has); a stream that gets no row for
``settings.idle_timeout_s`` while not paused ends with a ``lost`` abort
(:mod:`~router_core.worker_link.idle`); a request waits for admission while paused for
at most ``settings.pause_wait_s``.

One event loop uses a link; it is not thread-safe. Inbound messages that break the
protocol are counted in ``link.counters`` under ``rejected`` and skipped, never raised.

Observability without HTTP or metric libraries here: ``on_outputs`` is called once per
inbound output message with its hop latency (seconds from the sender's ``sent_ns``; None
if the sender did not stamp it), its row count and its size in bytes (every frame); and
with tracing on, a message whose header carries ``row_traces`` is handled inside one
``worker receive_outputs`` span (:func:`router_core.tracing.batch_span_if_traced`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import msgspec

from router_core.counters import Counters
from router_core.wire import Kind
from router_core.wire.codec import Frames, frame_message
from router_core.wire.control import LoadSnapshot
from router_core.wire.finish import abort_reason
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from router_core.worker_link.dispatch import (
    RECEIVE_SPAN,
    InboundDispatch,
    OutputsObserver,
)
from router_core.worker_link.effects import Send
from router_core.worker_link.errors import AdmissionRefused, RouterUnavailable
from router_core.worker_link.idle import UNREACHABLE_CAUSE, end_unreachable_streams, watch_idle
from router_core.worker_link.outcomes import ABORT_DROPPED, CONTROL_DROPPED, Count
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.settings import WorkerLinkSettings
from router_core.worker_link.shell import InboundShell
from router_core.worker_link.sockets import link_sockets
from router_core.worker_link.streams import ResponseStream
from router_core.worker_link.timer import RegistrationTimer, wait_event

__all__ = ["RECEIVE_SPAN", "AdmissionRefused", "OutputsObserver", "RouterUnavailable", "WorkerLink"]


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
        self.session = WorkerSession(identity, key=settings.key)
        self.counters = Counters()
        self._streams: dict[str, ResponseStream] = {}
        self._admission = asyncio.Event()
        #: Called on the loop with True when an operator's drain starts, False when it
        #: ends (the HTTP worker leaves and rejoins its port's listening group).
        self.on_draining: Callable[[bool], None] | None = None
        self._draining_seen = False
        self._timer = RegistrationTimer(
            self.session, self._send_control, register_retry_s=settings.register_retry_s
        )
        self._inbound = InboundShell(
            InboundDispatch(self.session, self._streams, self.counters),
            self.counters,
            send=self._send,
            on_change=self._on_session_change,
            on_outputs=on_outputs,
        )
        receive, on_lost = self._inbound.on_message, self._on_connection_lost
        self._sockets = link_sockets(settings, identity.worker_id, self.counters, receive, on_lost)
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> WorkerLink:
        """Bind the inbox, connect to the router and start registering.

        Raises ``EndpointError`` for an endpoint the loopback rule refuses and
        ``zmq.ZMQError`` when binding fails.
        """
        self._sockets.open()
        self._tasks = [
            asyncio.create_task(self._timer.run(), name="worker-link-timer"),
            asyncio.create_task(
                watch_idle(
                    self._streams,
                    self.session,
                    self.counters,
                    idle_timeout_s=self.settings.idle_timeout_s,
                    grace_s=self.settings.upstream_grace_s,
                ),
                name="worker-link-idle",
            ),
        ]
        return self

    def begin_stopping(self) -> None:
        """Refuse new requests from now on and report ``draining``; in-flight ones go on.

        Call from the loop's thread (from a signal handler, via ``call_soon_threadsafe``).
        """
        self.session.stopping = True
        self._admission.set()
        self._timer.state_may_have_changed()

    async def close(self, reason: str = "shutdown") -> None:
        """Abort what is still in flight, deregister, and close; safe to call twice.

        Every unfinished request is aborted in the engine (so it stops generating for a
        client that is gone) and its stream ends with an abort row, so a handler still
        running answers its client instead of hanging.
        """
        if not self._sockets.is_open():
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
        self.end_in_flight()
        if self.session.registered:
            self._send_control(self.session.deregistration(reason))
        self._sockets.close()

    def end_in_flight(self) -> None:
        """Abort every unfinished request in the engine and end its stream with an abort
        row, so that each handler answers its client (a stop's graceful time is up)."""
        for rid, stream in list(self._streams.items()):
            if not stream.finished:
                self.abort(rid, reason="shutdown")
                stream.close(abort_reason("worker shutting down"))

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
        """Return once a new request may be sent; wait while paused.

        Raises :class:`AdmissionRefused` at once when stopping (also when stopping starts
        during the wait; a draining worker admits), with ``not_registered`` when the
        router has not accepted this worker within ``settings.register_wait_s``, and with
        ``paused_too_long`` after ``settings.pause_wait_s`` of waiting while paused.
        """
        session, settings = self.session, self.settings
        started = time.monotonic()
        while not session.admitting:
            if session.stopping:
                raise AdmissionRefused("stopping")
            self._admission.clear()
            if session.registered:
                remaining = started + settings.pause_wait_s - time.monotonic()
                if remaining <= 0:
                    self.counters.add("admission_refused", "paused_too_long")
                    raise AdmissionRefused("paused_too_long")
            else:
                remaining = started + settings.register_wait_s - time.monotonic()
                if remaining <= 0:
                    raise AdmissionRefused("not_registered")
            await wait_event(self._admission, remaining)

    def has_stream(self, rid: str) -> bool:
        """Whether ``rid`` is in flight here (a new request may not reuse it)."""
        return rid in self._streams

    @contextlib.contextmanager
    def open_stream(self, rid: str) -> Iterator[ResponseStream]:
        """Count ``rid`` in flight and route its rows to the yielded stream.

        On exit the request leaves the in-flight set; if its stream has not finished (the
        client went away, or an error) or ended as lost to a fault (the engine may still
        be generating it), an ABORT is sent so the engine stops it. Raises
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
            if (not stream.finished or stream.lost_cause) and self._sockets.is_open():
                self.abort(rid, reason=stream.lost_cause or "client")
            self._timer.state_may_have_changed()

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
        sockets = self._sockets
        if not sockets.is_open():
            raise RouterUnavailable("the worker link is closed")
        stream = self._streams.get(request.rid)
        if stream is not None:
            stream.engine_incarnation = self.session.engine_incarnation
        sent: Count = ("requests_sent", kind.name.lower())
        if stream is not None:
            stream.sent = frames
        if sockets.send("requests", frames, sent=sent):
            self.session.requests_sent += 1
            return
        # Backpressure is rare (the router reads requests as fast as the engine takes
        # them), so waiting polls with a growing pause instead of watching the socket.
        deadline = time.monotonic() + self.settings.send_timeout_s
        pause = 0.001
        while time.monotonic() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)
            if not sockets.is_open():  # closed while waiting
                break
            if sockets.send("requests", frames, sent=sent):
                self.session.requests_sent += 1
                return
        if stream is not None:
            stream.sent = None
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
        self._sockets.send("requests", frames, sent=("aborts_sent", reason), unsent=ABORT_DROPPED)

    # ------------------------------------------------------------------ wiring

    def _send_control(self, frames: Frames, unsent: Count = CONTROL_DROPPED) -> bool:
        """Send a control message to the router without blocking (see LinkSockets.send)."""
        return self._sockets.send("control", frames, unsent=unsent)

    def _send(self, send: Send) -> None:
        """Carry out a send the inbound core asked for."""
        self._sockets.send(send.channel, send.frames, sent=send.sent, unsent=send.unsent)

    def _on_connection_lost(self) -> None:
        """A worker on another host lost its gateway connection: what the router sends
        cannot reach it, so every request in flight ends now, and it is unregistered
        (``/health`` 503) until the timer's registrations get through again."""
        self.session.registered = False
        for _ in end_unreachable_streams(self._streams.values()):
            self.counters.add("lost_requests", UNREACHABLE_CAUSE)
        self._admission.set()

    def _on_session_change(self) -> None:
        """After a reply, broadcast or drain: admission may open, the state may differ;
        ``on_draining`` hears when draining starts or ends."""
        self._admission.set()
        self._timer.state_may_have_changed()
        if self.session.draining != self._draining_seen:
            self._draining_seen = self.session.draining
            if self.on_draining is not None:
                self.on_draining(self._draining_seen)
