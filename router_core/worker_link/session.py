"""A worker's side of the registry protocol, as pure state: no sockets, no clock.

:class:`WorkerSession` knows whether the worker is registered, paused (and how), draining,
and which requests are in flight; each ``on_*`` method applies one message from the
router and returns the frames to send back (acknowledgements, a fresh registration).
:class:`router_core.worker_link.WorkerLink` is the I/O around it.

Pause and continue operations are applied in their order ``(router incarnation,
sequence)`` (:func:`~router_core.wire.control.op_order`): an older operation arriving
late is acknowledged but changes nothing. A registration reply from a router incarnation
newer than any seen before sets the state whatever its ``op_id`` (the router that
replaced ours knows best), and counts as a router restart.

Credentials: the registration carries the stack key (if the worker has one); the
router's accepted reply carries a secret, which every heartbeat, acknowledgement and
deregistration carries from then on (the router refuses those without it). A refusal
for want of the key (``bad_key``) is not answered by an immediate new registration (the
timer tries again at its retry interval), and is ignored while registered: a real one
only follows an "unknown worker" refusal, which unregisters first.
"""

from __future__ import annotations

from typing import Final

from router_core.beacon import MAX_UPSTREAM_PROCESSES
from router_core.identifiers import check_worker_id
from router_core.wire import Kind
from router_core.wire.codec import Frames, frame_message
from router_core.wire.control import (
    REASON_BAD_KEY,
    Acknowledgement,
    Deregistration,
    DrainCommand,
    Heartbeat,
    LoadSnapshot,
    OpOrder,
    PauseContinueBroadcast,
    PauseMode,
    RegistrationReply,
    UpstreamIncarnation,
    WorkerRegistration,
    WorkerReportedState,
    op_order,
)

__all__ = ["WorkerIdentity", "WorkerSession"]

#: The heartbeat interval used until the router's reply names one.
DEFAULT_HEARTBEAT_INTERVAL_S: Final = 1.0


class WorkerIdentity:
    """What a worker registers as; fixed for the worker's lifetime.

    ``ValueError`` for a ``worker_id`` that breaks the identifier rule
    (:data:`router_core.identifiers.WORKER_ID_RULE`): a router would refuse it."""

    __slots__ = ("address", "host", "pid", "started_ns", "version", "worker_id")

    def __init__(
        self, worker_id: str, address: str, *, pid: int, host: str, version: str, started_ns: int
    ) -> None:
        self.worker_id = check_worker_id(worker_id)
        self.address = address
        self.pid = pid
        self.host = host
        self.version = version
        self.started_ns = started_ns


class WorkerSession:
    """Registration, pause and drain state of one worker, and its in-flight requests.

    ``key`` is the stack key this worker registers with (None: none)."""

    def __init__(self, identity: WorkerIdentity, *, key: str | None = None) -> None:
        self.identity = identity
        self._key = key or ""
        #: The secret of the accepted registration ("" before one).
        self._secret = ""
        #: Why the router last refused a registration ("" since an accepted one).
        self.refusal = ""
        self.registered = False
        self.paused = False
        self.pause_mode: PauseMode | None = None
        self.draining = False
        self.stopping = False
        self.inflight: set[str] = set()
        self.load: LoadSnapshot | None = None
        self.heartbeat_interval_s = DEFAULT_HEARTBEAT_INTERVAL_S
        #: Totals reported in heartbeats (the link counts them).
        self.requests_sent = 0
        self.rows_received = 0
        #: The newest router incarnation heard from (0: none yet).
        self.router_incarnation = 0
        #: Times a newer router incarnation replaced one this worker knew.
        self.router_restarts = 0
        #: The newest incarnation of each output-path process (detokenizer router,
        #: detokenizers), as the router passed them on.
        self.upstream: dict[str, int] = {}
        #: The order of the newest operation applied (None: none yet).
        self.last_op: OpOrder | None = None
        self._heartbeat_seq = 0

    @property
    def worker_id(self) -> str:
        """This worker's id."""
        return self.identity.worker_id

    @property
    def state(self) -> WorkerReportedState:
        """The state reported in heartbeats."""
        if not self.registered:
            return "starting"
        if self.draining or self.stopping:
            return "draining" if self.inflight else "drained"
        return "paused" if self.paused else "serving"

    @property
    def admitting(self) -> bool:
        """Whether a new request may be sent now: registered, not paused, not stopping.

        A draining worker still admits what arrives on the connections it holds (it takes
        no new ones, and each ends after its response), so that no client racing the
        drain is refused; it reports ``drained`` once nothing is in flight.
        """
        return self.registered and not self.paused and not self.stopping

    # ------------------------------------------------------------------ outbound

    def registration(self) -> Frames:
        """A registration message (idempotent at the router; sent again at will)."""
        me = self.identity
        registration = WorkerRegistration(
            worker_id=me.worker_id,
            address=me.address,
            pid=me.pid,
            host=me.host,
            version=me.version,
            started_ns=me.started_ns,
            key=self._key,
        )
        return frame_message(Kind.REGISTER, registration)

    def heartbeat(self) -> Frames:
        """A heartbeat carrying the current state and in-flight count."""
        self._heartbeat_seq += 1
        beat = Heartbeat(
            worker_id=self.worker_id,
            seq=self._heartbeat_seq,
            state=self.state,
            inflight=len(self.inflight),
            address=self.identity.address,
            requests_sent=self.requests_sent,
            rows_received=self.rows_received,
            secret=self._secret,
        )
        return frame_message(Kind.HEARTBEAT, beat)

    def deregistration(self, reason: str = "shutdown") -> Frames:
        """The message that makes the router forget this worker."""
        leaving = Deregistration(self.worker_id, reason, secret=self._secret)
        return frame_message(Kind.DEREGISTER, leaving)

    # ------------------------------------------------------------------ inbound

    def on_registration_reply(self, reply: RegistrationReply) -> list[Frames]:
        """Apply the router's answer; a refusal (the router forgot us) means register again
        at once, unless it is for want of the key (see the module docstring)."""
        if reply.worker_id != self.worker_id:
            return []
        if not reply.accepted:
            if reply.reason == REASON_BAD_KEY:
                if not self.registered:
                    self.refusal = REASON_BAD_KEY
                return []
            self.registered = False
            return [self.registration()]
        self.registered = True
        self.refusal = ""
        self._secret = reply.secret
        self.heartbeat_interval_s = reply.heartbeat_interval_s or DEFAULT_HEARTBEAT_INTERVAL_S
        order = op_order(reply.op_id)
        if self._learn_incarnation(reply.incarnation):
            self.last_op = order  # the new router's word stands, older id or none
            self._set_pause(reply.paused, reply.pause_mode)
        elif self._is_current(order):
            self._set_pause(reply.paused, reply.pause_mode)
        return []

    def on_pause_broadcast(self, op: PauseContinueBroadcast) -> list[Frames]:
        """Apply a pause or continue (unless a newer one was applied), then acknowledge it.

        Acknowledging an outdated operation too keeps its barrier from waiting for us.
        """
        order = op_order(op.op_id)
        if order is not None:
            self._learn_incarnation(order[0])
        if self._is_current(order):
            self._set_pause(op.is_pause, op.mode)
        ack = Acknowledgement(op_id=op.op_id, participant=self.worker_id, secret=self._secret)
        return [frame_message(Kind.ACK, ack)]

    def _learn_incarnation(self, incarnation: int) -> bool:
        """Note a router incarnation; True when it is newer than every one seen."""
        if incarnation <= self.router_incarnation:
            return False
        if self.router_incarnation:
            self.router_restarts += 1
        self.router_incarnation = incarnation
        return True

    def _is_current(self, order: OpOrder | None) -> bool:
        """Whether an operation of ``order`` is at least as new as the last one applied
        (an id without an order is always applied, and then orders nothing)."""
        if order is None or self.last_op is None or order >= self.last_op:
            if order is not None:
                self.last_op = order
            return True
        return False

    def _set_pause(self, paused: bool, mode: PauseMode | None) -> None:
        self.paused = paused
        self.pause_mode = mode if paused else None

    def on_upstream(self, news: UpstreamIncarnation) -> bool:
        """Note an output-path process's incarnation; True when it grew (the process
        restarted, and the rows it held are gone). A first sighting is not a restart."""
        known = self.upstream.get(news.process)
        if known is not None and news.incarnation <= known:
            return False
        if known is None and len(self.upstream) >= MAX_UPSTREAM_PROCESSES:
            return False
        self.upstream[news.process] = news.incarnation
        return known is not None

    def on_drain(self, command: DrainCommand) -> bool:
        """Start or stop draining; True when the reported state changed."""
        if command.worker_id != self.worker_id:
            return False
        before = self.state
        self.draining = command.drain
        return self.state != before

    def on_load(self, snapshot: LoadSnapshot) -> bool:
        """Keep the newest engine load snapshot; True when it shows that the engine
        restarted (a new ``engine_started_ns``), which loses every request in flight."""
        previous = self.load
        if previous is not None and snapshot.taken_ns < previous.taken_ns:
            return False
        self.load = snapshot
        return previous is not None and previous.engine_started_ns not in (
            0,
            snapshot.engine_started_ns,
        )

    @property
    def engine_incarnation(self) -> int:
        """The ``engine_started_ns`` of the newest load snapshot (0 before the first)."""
        return 0 if self.load is None else self.load.engine_started_ns
