"""A worker's side of the registry protocol, as pure state: no sockets, no clock.

:class:`WorkerSession` knows whether the worker is registered, paused (and how), draining,
and which requests are in flight; each ``on_*`` method applies one message from the
router and returns the frames to send back (acknowledgements, a fresh registration).
:class:`router_core.worker_link.WorkerLink` is the I/O around it.
"""

from __future__ import annotations

from typing import Final

from router_core.wire import Kind
from router_core.wire.codec import Frames, frame_message
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    DrainCommand,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    PauseMode,
    RegistrationReply,
    WorkerRegistration,
    WorkerReportedState,
)

__all__ = ["WorkerIdentity", "WorkerSession", "op_sequence"]

#: The heartbeat interval used until the router's reply names one.
DEFAULT_HEARTBEAT_INTERVAL_S: Final = 1.0


def op_sequence(op_id: str) -> int:
    """The barrier sequence number in an op id (``<nonce>-<seq>``), or -1 if it has none."""
    _, _, tail = op_id.rpartition("-")
    return int(tail) if tail.isascii() and tail.isdigit() else -1


class WorkerIdentity:
    """What a worker registers as; fixed for the worker's lifetime."""

    __slots__ = ("address", "host", "pid", "started_ns", "version", "worker_id")

    def __init__(
        self, worker_id: str, address: str, *, pid: int, host: str, version: str, started_ns: int
    ) -> None:
        self.worker_id = worker_id
        self.address = address
        self.pid = pid
        self.host = host
        self.version = version
        self.started_ns = started_ns


class WorkerSession:
    """Registration, pause and drain state of one worker, and its in-flight requests."""

    def __init__(self, identity: WorkerIdentity) -> None:
        self.identity = identity
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
        self._last_op_seq = -1
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
        """Whether a new request may be sent now (registered, not paused, not draining)."""
        return self.registered and not self.paused and not self.draining and not self.stopping

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
        )
        return frame_message(Kind.HEARTBEAT, beat)

    def deregistration(self, reason: str = "shutdown") -> Frames:
        """The message that makes the router forget this worker."""
        return frame_message(Kind.DEREGISTER, Deregistration(self.worker_id, reason))

    # ------------------------------------------------------------------ inbound

    def on_registration_reply(self, reply: RegistrationReply) -> list[Frames]:
        """Apply the router's answer; a refusal (the router forgot us) means register again."""
        if reply.worker_id != self.worker_id:
            return []
        if not reply.accepted:
            self.registered = False
            return [self.registration()]
        self.registered = True
        self.heartbeat_interval_s = reply.heartbeat_interval_s or DEFAULT_HEARTBEAT_INTERVAL_S
        if op_sequence(reply.op_id) >= self._last_op_seq:
            self._last_op_seq = op_sequence(reply.op_id)
            self.paused = reply.paused
            self.pause_mode = reply.pause_mode if reply.paused else None
        return []

    def on_pause_broadcast(self, op: PauseContinueBroadcast) -> list[Frames]:
        """Apply a pause or continue (unless a newer one was applied), then acknowledge it.

        Acknowledging an outdated operation too keeps its barrier from waiting for us.
        """
        sequence = op_sequence(op.op_id)
        if sequence >= self._last_op_seq:
            self._last_op_seq = sequence
            self.paused = op.is_pause
            self.pause_mode = op.mode if op.is_pause else None
        ack = Acknowledgement(op_id=op.op_id, participant=self.worker_id)
        return [frame_message(Kind.ACK, ack)]

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
