"""The tokenizer router: workers <-> engine, registry, liveness and the pause barrier.

Forward path: a worker's request is forwarded to the engine on the strength of its
header alone; payload frames pass through untouched. When the engine's socket is full
the router stops reading requests (ZeroMQ then pushes back on the workers) rather than
dropping any; worker control traffic has its own socket and keeps flowing.

Backward path (outputs that come through the router): rows are grouped by owning worker
and each worker gets one message.
Every inbound frame is decoded as a header first; whatever does not fit the protocol is
counted under ``rejected`` with a reason and the loop goes on.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec
import zmq

from router_core import tracing
from router_core.barrier import PauseBarrier, PauseOperation
from router_core.control.server import ControlServer, ReplyTo
from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.endpoints import EndpointError, check_endpoint
from router_core.histogram import BARRIER_BUCKETS, HistogramSet
from router_core.inbound import BoundSockets, Handler, drain, regroup
from router_core.loop import PollLoop
from router_core.registry import WorkerRecord, WorkerRegistry
from router_core.tokenizer_router.forward import ForwardHop, kind_label
from router_core.tokenizer_router.settings import RouterSettings
from router_core.traffic import BACKWARD, BROADCAST, CONTROL, TrafficStats, message_bytes
from router_core.transport import FrameLike
from router_core.version import package_version
from router_core.wire import (
    BATCH_KINDS,
    Header,
    Kind,
    WireError,
    decode_payload,
    frame_message,
    group_by_destination,
)
from router_core.wire.control import (
    ENGINE,
    Acknowledgement,
    ContinueRequest,
    Deregistration,
    DrainCommand,
    FreezeGC,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    PauseMode,
    PauseRequest,
    RegistrationReply,
    WorkerRegistration,
)

__all__ = ["ENGINE", "TokenizerRouter"]

logger = logging.getLogger(__name__)

#: The span of splitting one batch of outputs to its workers (``--outputs-via router``).
SPLIT_SPAN: Final = "tokenizer-router split_outputs"

#: Finished pause/continue operations kept for ``status``.
RECENT_OPERATIONS: Final = 20


class TokenizerRouter:
    """Runs in one thread: :meth:`run` opens the sockets, loops, and closes them.

    Nothing happens in ``__init__``; :meth:`request_stop` may be called from a signal
    handler or another thread.
    """

    def __init__(
        self,
        settings: RouterSettings,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self.settings = settings
        self._context = context
        self.counters = Counters()
        self.traffic = TrafficStats()
        #: Seconds from broadcast to answer, per operation (``pause``/``continue``).
        self.barrier_time = HistogramSet(BARRIER_BUCKETS)
        #: Finished operations per ``(operation, mode, result)``.
        self.finished_operations: dict[tuple[str, str, str], int] = {}
        self.registry = WorkerRegistry(settings.heartbeat_timeout_s)
        self.barrier = PauseBarrier()
        self.latest_load: LoadSnapshot | None = None
        self.load_received_at: float | None = None
        self.engine_seen_at: float | None = None
        self.started_at = time.monotonic()
        self.started_wall = time.time()
        #: When the pause state last changed (Unix seconds); None until the first change.
        self.pause_state_since: float | None = None
        #: Outcomes of the latest pause/continue operations, oldest first.
        self.recent_operations: deque[dict[str, Any]] = deque(maxlen=RECENT_OPERATIONS)
        self._loop = PollLoop()
        self._next_expiry_check = 0.0
        self._forward: ForwardHop | None = None
        self.control: ControlServer[TokenizerRouter] | None = None
        self.workers: DestinationSet | None = None
        self.engine: Destination | None = None
        self._worker_handlers: dict[Kind, Callable[[Header, list[FrameLike]], None]] = {
            Kind.REGISTER: self._on_register,
            Kind.HEARTBEAT: self._on_heartbeat,
            Kind.DEREGISTER: self._on_deregister,
            Kind.ACK: self._on_worker_ack,
        }
        self._engine_handlers: dict[Kind, Callable[[Header, list[FrameLike]], None]] = {
            Kind.ACK: self._on_engine_ack,
            Kind.LOAD: self._on_load,
        }

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Bind, serve until stopped, then drain destinations and close everything."""
        from router_core.tokenizer_router.commands import COMMANDS

        owns_context = self._context is None
        context = self._context or zmq.Context()
        settings, endpoints = self.settings, self.settings.endpoints
        self.workers = DestinationSet(
            context, self.counters, hwm=settings.hwm, backlog_limit=settings.backlog_limit
        )
        engines = DestinationSet(
            context, self.counters, hwm=settings.hwm, backlog_limit=settings.backlog_limit
        )
        bound = BoundSockets(context, hwm=settings.hwm, allow_remote=settings.allow_remote)
        try:
            with bound:
                requests_in = bound.bind(zmq.PULL, endpoints.requests)
                workers_in = bound.bind(zmq.PULL, endpoints.workers)
                engine_events = bound.bind(zmq.PULL, endpoints.engine_events)
                outputs_in = bound.bind(zmq.PULL, endpoints.outputs)
                control = bound.bind(zmq.ROUTER, endpoints.control)
                self.engine = engine = engines.get(ENGINE, endpoints.engine)
                engine.socket  # noqa: B018  (connect now: a bad endpoint fails the start)
                self.control = ControlServer(control, self, COMMANDS, self.counters)
                self._forward = forward = ForwardHop(
                    engine, self.counters, self.traffic, self.worker_label
                )
                self._loop.watch(
                    requests_in, lambda: forward.drain(requests_in), gate=lambda: not engine.backlog
                )
                self._watch(workers_in, self._on_worker_message)
                self._watch(engine_events, self._on_engine_event)
                self._watch(outputs_in, self._on_output)
                self._loop.watch(control, self.control.handle_ready)
                logger.info("tokenizer router serving in pid %d", os.getpid())
                try:
                    self._loop.run(self._backlogged, self._tick)
                finally:
                    self.workers.close_all(settings.drain_timeout_s)
                    engines.close_all(settings.drain_timeout_s)
                    logger.info("tokenizer router stopped")
        finally:
            if owns_context:
                context.term()

    def _watch(self, sock: zmq.Socket[bytes], handle: Handler) -> None:
        self._loop.watch(sock, lambda: drain(sock, handle, self.counters))

    def _backlogged(self) -> list[Destination]:
        assert self.workers is not None and self.engine is not None
        waiting = self.workers.backlogged()
        if self.engine.backlog:
            waiting.append(self.engine)
        return waiting

    def worker_label(self, address: str) -> str:
        """The id of the worker at ``address`` for metric labels (``unknown`` if none)."""
        record = self.registry.by_address(address)
        return "unknown" if record is None else record.worker_id

    def _on_worker_message(self, header: Header, frames: list[FrameLike]) -> None:
        handler = self._worker_handlers.get(header.kind)
        if handler is None:
            self.counters.add("rejected", "unexpected_kind")
            return
        handler(header, frames)

    def _count_control(self, worker_id: str, frames: Sequence[FrameLike]) -> None:
        """Count a control message from or to a registered worker (route ``control``)."""
        if self.registry.get(worker_id) is not None:
            self.traffic.add(CONTROL, worker_id, 1, message_bytes(frames))

    def _on_engine_event(self, header: Header, frames: list[FrameLike]) -> None:
        handler = self._engine_handlers.get(header.kind)
        if handler is None:
            self.counters.add("rejected", "unexpected_kind")
            return
        handler(header, frames)

    def _payload(self, header: Header, frames: list[FrameLike]) -> Any:
        """Decode the single payload frame; None (counted) if it does not decode."""
        try:
            return decode_payload(header.kind, frames[1])  # type: ignore[arg-type]
        except WireError as exc:
            self.counters.add("rejected", exc.reason)
            return None

    # ------------------------------------------------------------------ registry

    def _usable_address(self, address: str) -> bool:
        """Whether the router may send to ``address`` (counted under rejected if not).

        It must pass the endpoint rules (loopback unless allowed) and must not be one of
        the router's own or the engine's endpoints.
        """
        try:
            check_endpoint(address, allow_remote=self.settings.allow_remote)
        except EndpointError:
            self.counters.add("rejected", "bad_address")
            return False
        if address in msgspec.structs.astuple(self.settings.endpoints):
            self.counters.add("rejected", "bad_address")
            return False
        return True

    def _connectable(self, address: str) -> bool:
        """Connect the worker's destination now; False (counted) if libzmq refuses."""
        assert self.workers is not None
        try:
            self.workers.get(address).socket  # noqa: B018  (connects, or raises)
        except zmq.ZMQError:
            self.workers.discard(address, "connect_failed")
            self.counters.add("rejected", "bad_address")
            return False
        return True

    def _on_register(self, header: Header, frames: list[FrameLike]) -> None:
        registration = self._payload(header, frames)
        if not isinstance(registration, WorkerRegistration):
            return
        if registration.worker_id == ENGINE or not registration.worker_id:
            self.counters.add("rejected", "bad_worker_id")
            return
        if not self._usable_address(registration.address):
            return
        if not self._connectable(registration.address):
            return
        now = time.monotonic()
        record, replaced = self.registry.register(registration, now)
        for old in replaced:
            self._depart(old, "replaced")
        state = self.barrier.state
        if record.state == "starting":
            self.registry.transition(record, "paused" if state.paused else "serving")
        reply = RegistrationReply(
            worker_id=record.worker_id,
            accepted=True,
            paused=state.paused,
            pause_mode=state.mode,
            op_id=state.op_id,
            heartbeat_interval_s=self.settings.heartbeat_interval_s,
        )
        self.counters.add("registrations", "accepted")
        self._count_control(record.worker_id, frames)
        reply_frames = frame_message(Kind.REGISTER_REPLY, reply)
        if self._send_worker(record.address, reply_frames):
            self._count_control(record.worker_id, reply_frames)

    def _on_heartbeat(self, header: Header, frames: list[FrameLike]) -> None:
        heartbeat = self._payload(header, frames)
        if not isinstance(heartbeat, Heartbeat):
            return
        if self.registry.heartbeat(heartbeat, time.monotonic()) is not None:
            self._count_control(heartbeat.worker_id, frames)
            return
        address = heartbeat.address
        if address and not self._usable_address(address):
            return  # counted as bad_address
        self.counters.add("rejected", "unknown_worker")
        if address and self.registry.by_address(address) is None:
            reply = RegistrationReply(
                worker_id=heartbeat.worker_id, accepted=False, reason="unknown worker; register"
            )
            assert self.workers is not None
            self.workers.send_once(address, frame_message(Kind.REGISTER_REPLY, reply))

    def _on_deregister(self, header: Header, frames: list[FrameLike]) -> None:
        leaving = self._payload(header, frames)
        if not isinstance(leaving, Deregistration):
            return
        self._count_control(leaving.worker_id, frames)
        record = self.registry.deregister(leaving.worker_id)
        if record is None:
            self.counters.add("rejected", "unknown_worker")
            return
        self.counters.add("deregistrations", leaving.reason[:32] or "unspecified")
        self._depart(record, "deregistered")

    def _depart(self, record: WorkerRecord, reason: str) -> None:
        """A worker left: close its socket and stop waiting for its acknowledgements."""
        self.registry.remember_departure(record, reason, time.monotonic())
        self._forget_address(record.address, reason)
        for op in self.barrier.depart(record.worker_id):
            self._answer(op)

    def _forget_address(self, address: str, reason: str) -> None:
        assert self.workers is not None
        self.workers.discard(address, reason)

    def _send_worker(self, address: str, frames: Sequence[FrameLike]) -> bool:
        assert self.workers is not None
        return self.workers.send(address, frames)

    def _broadcast_to(self, record: WorkerRecord, frames: Sequence[FrameLike]) -> None:
        """Send a router-originated message to one worker, counted on route ``broadcast``."""
        if self._send_worker(record.address, frames):
            self.traffic.add(BROADCAST, record.worker_id, 1, message_bytes(frames))

    # ------------------------------------------------------------------ barrier

    def _on_worker_ack(self, header: Header, frames: list[FrameLike]) -> None:
        ack = self._payload(header, frames)
        if not isinstance(ack, Acknowledgement):
            return
        if ack.participant == ENGINE:
            self.counters.add("rejected", "ack_impersonation")
            return
        self._count_control(ack.participant, frames)
        self._on_ack(ack)

    def _on_engine_ack(self, header: Header, frames: list[FrameLike]) -> None:
        ack = self._payload(header, frames)
        if not isinstance(ack, Acknowledgement):
            return
        if ack.participant != ENGINE:
            self.counters.add("rejected", "ack_impersonation")
            return
        self.engine_seen_at = time.monotonic()
        self._on_ack(ack)

    def _on_ack(self, ack: Acknowledgement) -> None:
        record = self.registry.get(ack.participant)
        if record is not None:
            record.last_seen = time.monotonic()
        pending = any(op.op_id == ack.op_id for op in self.barrier.pending)
        op = self.barrier.acknowledge(ack.op_id, ack.participant)
        self.counters.add("acks", "pending" if pending else "late")
        self._apply_ack_to_registry(ack)
        if op is not None:
            self._answer(op)

    def _apply_ack_to_registry(self, ack: Acknowledgement) -> None:
        record = self.registry.get(ack.participant)
        state = self.barrier.state
        if record is None or record.state in ("draining", "drained") or ack.op_id != state.op_id:
            return
        self.registry.transition(record, "paused" if state.paused else "serving")

    def start_pause_operation(
        self, *, is_pause: bool, mode: PauseMode | None, timeout_s: float | None, waiter: ReplyTo
    ) -> PauseOperation:
        """Broadcast a pause or continue to every live worker and the engine."""
        now = time.monotonic()
        if is_pause != self.barrier.state.paused or not self.pause_state_since:
            self.pause_state_since = time.time()
        live = {r.worker_id for r in self.registry.workers()}
        if self.engine_is_live(now):
            live.add(ENGINE)
        op = self.barrier.start(
            is_pause=is_pause,
            mode=mode,
            participants=live,
            timeout_s=self.settings.barrier_timeout_s if timeout_s is None else timeout_s,
            now=now,
            waiter=waiter,
        )
        broadcast = frame_message(
            Kind.PAUSE_BROADCAST, PauseContinueBroadcast(op.op_id, is_pause, op.mode)
        )
        for record in self.registry.workers():
            self._broadcast_to(record, broadcast)
        engine_message: PauseRequest | ContinueRequest = (
            PauseRequest(op.op_id, mode or "abort") if is_pause else ContinueRequest(op.op_id)
        )
        assert self.engine is not None
        self.engine.send(frame_message(Kind.PAUSE if is_pause else Kind.CONTINUE, engine_message))
        self.counters.add("pause_operations", "pause" if is_pause else "continue")
        return op

    def engine_is_live(self, now: float) -> bool:
        """Whether the engine has sent an event within ``engine_timeout_s``."""
        seen = self.engine_seen_at
        return seen is not None and now - seen <= self.settings.engine_timeout_s

    def outcome_of(self, op: PauseOperation) -> dict[str, Any]:
        """The answer to a finished operation, also kept in ``recent_operations``."""
        outcome = {**op.outcome(time.monotonic()), "finished_at": round(time.time(), 3)}
        self.recent_operations.append(outcome)
        return outcome

    def _answer(self, op: PauseOperation) -> None:
        outcome = self.outcome_of(op)
        operation = "pause" if op.is_pause else "continue"
        key = (operation, op.mode or "none", "complete" if op.complete else "timeout")
        self.finished_operations[key] = self.finished_operations.get(key, 0) + 1
        self.barrier_time.observe(operation, time.monotonic() - op.started_at)
        if self.control is not None and isinstance(op.waiter, ReplyTo):
            self.control.answer(op.waiter, outcome)
        if not op.complete:
            self.counters.add("pause_timeouts", "pause" if op.is_pause else "continue")

    # ------------------------------------------------------------------ engine events

    def _on_load(self, header: Header, frames: list[FrameLike]) -> None:
        snapshot = self._payload(header, frames)
        if not isinstance(snapshot, LoadSnapshot):
            return
        self.engine_seen_at = time.monotonic()
        self.latest_load = snapshot
        self.load_received_at = time.monotonic()
        for record in self.registry.workers():
            self._broadcast_to(record, frames)

    def send_drain(self, record: WorkerRecord, drain: bool) -> None:
        """Tell a worker to stop (or resume) admitting requests."""
        self._broadcast_to(record, frame_message(Kind.DRAIN, DrainCommand(record.worker_id, drain)))

    def freeze_gc(self) -> None:
        """Freeze GC here and ask the engine to do the same (it tells the detokenizers)."""
        gc.freeze()
        assert self.engine is not None
        self.engine.send(frame_message(Kind.FREEZE_GC, FreezeGC(reason="control")))

    # ------------------------------------------------------------------ backward path

    def _on_output(self, header: Header, frames: list[FrameLike]) -> None:
        kind = header.kind
        if kind in BATCH_KINDS:
            self._split_to_workers(header, frames)
        elif kind is Kind.FREEZE_GC:
            for record in self.registry.workers():
                self._broadcast_to(record, frames)
        elif kind is Kind.IDLE:
            self.counters.add("idle_batches", "outputs")
        else:
            self.counters.add("rejected", "unexpected_kind")

    def _split_to_workers(self, header: Header, frames: list[FrameLike]) -> None:
        """One message per owning worker, carrying that worker's rows.

        Delivered outputs are counted by the receiving worker (route ``backward``), the
        same in both output modes; the router records the split size.
        """
        self.traffic.split_rows.observe(BACKWARD, len(header.rids))
        if header.row_traces and tracing.enabled():
            with tracing.batch_span(SPLIT_SPAN, header.row_traces):
                self._send_rows(header, frames)
        else:
            self._send_rows(header, frames)

    def _send_rows(self, header: Header, frames: list[FrameLike]) -> None:
        for address, rows in group_by_destination(header.reply_to).items():
            if self.registry.by_address(address) is None:
                self.counters.add("dropped", "unknown_worker", len(rows))
            elif self._send_worker(address, regroup(header, frames, rows)):
                self.counters.add("routed_rows", kind_label(header.kind), len(rows))

    # ------------------------------------------------------------------ timers

    def _tick(self, now: float) -> float | None:
        if now >= self._next_expiry_check:
            for record in self.registry.expire(now):
                logger.warning("worker %s missed heartbeats: dead", record.worker_id)
                self.counters.add("dead_workers", "heartbeat_timeout")
                self._depart(record, "dead_worker")
            self._next_expiry_check = now + min(0.25, self.settings.heartbeat_timeout_s / 4)
        for op in self.barrier.expire(now):
            self._answer(op)
        deadlines = [self._next_expiry_check]
        barrier_deadline = self.barrier.next_deadline()
        if barrier_deadline is not None:
            deadlines.append(barrier_deadline)
        return min(deadlines)

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Counters, registry summary, pause state and backlogs, for ``status``."""
        now = time.monotonic()
        states: dict[str, int] = {}
        for record in self.registry.workers():
            states[record.state] = states.get(record.state, 0) + 1
        state = self.barrier.state
        assert self.workers is not None and self.engine is not None
        return {
            "role": "tokenizer_router",
            "pid": os.getpid(),
            "uptime_s": round(now - self.started_at, 3),
            "paused": state.paused,
            "pause_mode": state.mode,
            "last_op_id": state.op_id,
            "last_op_seq": state.seq,
            "pause_state_since": round(self.pause_state_since or self.started_wall, 3),
            "pending_operations": len(self.barrier.pending),
            "recent_operations": list(self.recent_operations),
            "version": package_version(),
            "workers": states,
            "engine_live": self.engine_is_live(now),
            "counters": self.counters.snapshot(),
            "backlogs": {**self.workers.backlog_sizes(), ENGINE: len(self.engine.backlog)},
        }
