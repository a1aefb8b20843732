"""The worker registry: who is registered, their state, and who has gone quiet.

Pure bookkeeping (no sockets, time passed in), so every transition is tested directly.
States::

    starting -> serving <-> paused
    serving/paused -> draining -> drained -> serving/paused (undrain)
    serving/paused -> drained (a worker with nothing in flight drains at once)
    any -> dead (missed heartbeats past the timeout; the record is then removed)

A removed worker (dead, deregistered or replaced) stays visible as a :class:`Departure`
for a while, so operators can see who left and why.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from router_core.control.replies import WorkerState, WorkerView
from router_core.wire.control import Heartbeat, WorkerRegistration

__all__ = [
    "ALLOWED_TRANSITIONS",
    "MAX_DEPARTED",
    "Departure",
    "WorkerRecord",
    "WorkerRegistry",
    "WorkerState",
]

ALLOWED_TRANSITIONS: Final[dict[WorkerState, frozenset[WorkerState]]] = {
    "starting": frozenset({"serving", "paused", "draining", "dead"}),
    "serving": frozenset({"paused", "draining", "drained", "dead"}),
    "paused": frozenset({"serving", "draining", "drained", "dead"}),
    "draining": frozenset({"drained", "serving", "paused", "dead"}),
    "drained": frozenset({"serving", "paused", "draining", "dead"}),
    # Only ever shown (WorkerRecord.shown_state), never stored.
    "unresponsive": frozenset(),
    "dead": frozenset(),
}


@dataclass
class WorkerRecord:
    """What the router knows about one worker."""

    worker_id: str
    address: str
    pid: int
    host: str
    version: str
    started_ns: int
    registered_at: float
    last_seen: float
    state: WorkerState = "starting"
    inflight: int = 0
    heartbeats: int = 0
    #: The worker's own totals, from its latest heartbeat.
    requests_sent: int = 0
    rows_received: int = 0
    #: The operator's last drain command not yet confirmed by the worker's heartbeats.
    #: While set, a heartbeat that crossed the command (it still reports the opposite)
    #: does not undo it. ``drain`` stays until undrain; ``undrain`` clears once the worker
    #: reports serving or paused.
    drain_command: Literal["drain", "undrain"] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The secret of this worker's registration: its heartbeats, acknowledgements and
    #: deregistration must carry it. Never shown in a view (nor in a repr).
    secret: str = field(default="", repr=False)

    def same_process(self, registration: WorkerRegistration) -> bool:
        """Whether ``registration`` comes from the process this record registered (the
        same address, pid and start): a repeat, not a new incarnation of the worker."""
        return (
            registration.address == self.address
            and registration.pid == self.pid
            and registration.started_ns == self.started_ns
        )

    def shown_state(self, now: float, unresponsive_after_s: float | None) -> WorkerState:
        """The state views show: ``unresponsive`` once silent longer than
        ``unresponsive_after_s`` (None: never), else the stored one."""
        if unresponsive_after_s is not None and now - self.last_seen > unresponsive_after_s:
            return "unresponsive"
        return self.state

    def view(
        self, now: float, wall_now: float, unresponsive_after_s: float | None = None
    ) -> WorkerView:
        """The worker as control replies show it (see :meth:`shown_state`).

        ``now`` is the monotonic clock; ``wall_now`` the Unix time at the same instant,
        used to give ``registered_at`` and ``last_heartbeat_at`` as Unix seconds.
        """
        wall = wall_now
        return WorkerView(
            worker_id=self.worker_id,
            address=self.address,
            pid=self.pid,
            host=self.host,
            version=self.version,
            started_ns=self.started_ns,
            state=self.shown_state(now, unresponsive_after_s),
            inflight=self.inflight,
            heartbeats=self.heartbeats,
            last_seen_s_ago=round(now - self.last_seen, 3),
            registered_at=round(wall - (now - self.registered_at), 3),
            last_heartbeat_at=round(wall - (now - self.last_seen), 3),
            requests_sent=self.requests_sent,
            rows_received=self.rows_received,
            safe_to_delete=self.state == "drained" and self.inflight == 0,
        )


@dataclass(frozen=True)
class Departure:
    """A worker that left the registry: when, and why (``deregistered``, ``dead_worker``,
    ``replaced``)."""

    record: WorkerRecord
    reason: str
    at: float

    def view(self, now: float, wall_now: float) -> WorkerView:
        """The worker's last view, in state ``dead``, with why and how long ago it left."""
        return msgspec.structs.replace(
            self.record.view(now, wall_now),
            state="dead",
            inflight=0,
            safe_to_delete=True,
            departure_reason=self.reason,
            departed_s_ago=round(now - self.at, 3),
        )


#: Departed workers remembered at most.
MAX_DEPARTED = 256


class WorkerRegistry:
    """Workers by id, with an index by return address."""

    def __init__(self, heartbeat_timeout_s: float, departed_ttl_s: float = 300.0) -> None:
        if heartbeat_timeout_s <= 0 or departed_ttl_s < 0:
            raise ValueError("heartbeat_timeout_s must be positive, departed_ttl_s >= 0")
        self.heartbeat_timeout_s = heartbeat_timeout_s
        #: Silence after which a worker is shown ``unresponsive``: half the timeout.
        self.unresponsive_after_s = heartbeat_timeout_s / 2
        self.departed_ttl_s = departed_ttl_s
        self._by_id: dict[str, WorkerRecord] = {}
        self._by_address: dict[str, WorkerRecord] = {}
        self._departed: deque[Departure] = deque(maxlen=MAX_DEPARTED)

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, worker_id: str) -> WorkerRecord | None:
        """The record for ``worker_id``, if registered."""
        return self._by_id.get(worker_id)

    def by_address(self, address: str) -> WorkerRecord | None:
        """The record of the worker whose return address is ``address``."""
        return self._by_address.get(address)

    def workers(self) -> list[WorkerRecord]:
        """Every registered worker, in registration order."""
        return list(self._by_id.values())

    def register(
        self, registration: WorkerRegistration, now: float, secret: str = ""
    ) -> tuple[WorkerRecord, list[WorkerRecord]]:
        """Add or refresh a worker; idempotent for a repeated registration.

        A repeated registration (same id, same address) refreshes the record (pid, host,
        version, start) and keeps its state. ``secret`` becomes the record's secret.
        Returns the record and the records it replaced: the worker's previous
        incarnation if it came back with a new address, and another worker that held
        this address. Replaced records are removed; their sockets should be closed.
        """
        replaced: list[WorkerRecord] = []
        record = self._by_id.get(registration.worker_id)
        holder = self._by_address.get(registration.address)
        if holder is not None and holder.worker_id != registration.worker_id:
            self._remove(holder)
            replaced.append(holder)
        if record is not None and record.address != registration.address:
            self._remove(record)
            replaced.append(record)
            record = None
        if record is None:
            record = WorkerRecord(
                worker_id=registration.worker_id,
                address=registration.address,
                pid=registration.pid,
                host=registration.host,
                version=registration.version,
                started_ns=registration.started_ns,
                registered_at=now,
                last_seen=now,
            )
            self._by_id[record.worker_id] = record
            self._by_address[record.address] = record
        else:
            record.pid = registration.pid
            record.host = registration.host
            record.version = registration.version
            record.started_ns = registration.started_ns
            record.last_seen = now
        record.secret = secret
        return record, replaced

    def heartbeat(self, heartbeat: Heartbeat, now: float) -> WorkerRecord | None:
        """Record a heartbeat; None if the worker is unknown (it should re-register)."""
        record = self._by_id.get(heartbeat.worker_id)
        if record is None:
            return None
        record.last_seen = now
        record.heartbeats += 1
        record.inflight = heartbeat.inflight
        record.requests_sent = heartbeat.requests_sent
        record.rows_received = heartbeat.rows_received
        admitting = heartbeat.state in ("serving", "paused")
        if record.drain_command == "undrain" and admitting:
            record.drain_command = None
        crossed = record.drain_command == ("drain" if admitting else "undrain")
        if not crossed:
            self.transition(record, heartbeat.state)
        return record

    @staticmethod
    def transition(record: WorkerRecord, new_state: WorkerState) -> bool:
        """Move ``record`` to ``new_state`` if allowed; False (unchanged) if not."""
        if new_state == record.state:
            return True
        if new_state not in ALLOWED_TRANSITIONS[record.state]:
            return False
        record.state = new_state
        return True

    def command_drain(self, record: WorkerRecord) -> bool:
        """The operator drains ``record``: move it to draining; False if its state forbids."""
        if record.state not in ("draining", "drained") and not self.transition(record, "draining"):
            return False
        record.drain_command = "drain"
        return True

    def command_undrain(self, record: WorkerRecord, resume_state: WorkerState) -> bool:
        """The operator undrains ``record`` back to ``resume_state``; False if not draining."""
        if record.state not in ("draining", "drained"):
            return False
        record.drain_command = "undrain"
        self.transition(record, resume_state)
        return True

    def deregister(self, worker_id: str) -> WorkerRecord | None:
        """Forget a worker that left cleanly; None if it was not registered."""
        record = self._by_id.get(worker_id)
        if record is not None:
            self._remove(record)
        return record

    def expire(self, now: float) -> list[WorkerRecord]:
        """Mark every worker silent past the timeout ``dead``, remove and return them."""
        cutoff = now - self.heartbeat_timeout_s
        dead = [record for record in self._by_id.values() if record.last_seen < cutoff]
        for record in dead:
            record.state = "dead"
            self._remove(record)
        return dead

    def next_expiry(self) -> float | None:
        """When the quietest worker expires, if nobody heartbeats before then."""
        if not self._by_id:
            return None
        return min(r.last_seen for r in self._by_id.values()) + self.heartbeat_timeout_s

    def remember_departure(self, record: WorkerRecord, reason: str, now: float) -> None:
        """Keep a removed worker visible as ``dead`` for ``departed_ttl_s`` (operators see
        who left and why); a worker that registers again under its id replaces it."""
        self._departed.append(Departure(record, reason, now))

    def departed(self, now: float) -> list[Departure]:
        """Workers that left within ``departed_ttl_s`` and have not come back, oldest first."""
        while self._departed and self._departed[0].at < now - self.departed_ttl_s:
            self._departed.popleft()
        latest: dict[str, Departure] = {}
        for departure in self._departed:
            if departure.record.worker_id not in self._by_id:
                latest[departure.record.worker_id] = departure
        return list(latest.values())

    def _remove(self, record: WorkerRecord) -> None:
        self._by_id.pop(record.worker_id, None)
        if self._by_address.get(record.address) is record:
            del self._by_address[record.address]
