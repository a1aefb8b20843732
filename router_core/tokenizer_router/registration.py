"""Registration and liveness: the handlers of the workers' control socket but acks.

A worker registers (and may register again at will), heartbeats, and deregisters when it
leaves; one that stops heartbeating past the timeout is dead. Every departure closes the
worker's socket and releases the barriers waiting for it. The router answers a
registration with the current pause state and its own incarnation, so a late joiner
(or a worker of the router this one replaced) starts in step, re-drains a worker an
operator drained, and tells a heartbeating stranger (a worker of a router that
restarted) to register again.

Who may do so (:mod:`router_core.tokenizer_router.peers`): a registration must carry the
stack key (when the router has one) and well-formed identifiers
(:mod:`router_core.identifiers`); each accepted registration gets a new secret, and a
heartbeat, acknowledgement or deregistration in a registered worker's name must carry
the latest one. Anything else is refused, counted under ``rejected`` by reason.

Pure: ``connect(address)`` is the shell's probe that the router can open a socket to a
worker (it creates the destination); time comes in as an :class:`Instant`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from router_core.counters import Counters
from router_core.credentials import matches, new_secret
from router_core.endpoints import EndpointError, check_endpoint
from router_core.identifiers import valid_address, valid_host, valid_version, valid_worker_id
from router_core.registry import WorkerRecord, WorkerRegistry
from router_core.tokenizer_router.durable import DrainMarks
from router_core.tokenizer_router.effects import Effect, Forget, Instant, Persist, Send
from router_core.tokenizer_router.pause import PauseCoordinator
from router_core.tokenizer_router.peers import PeerCheck
from router_core.tokenizer_router.settings import RouterSettings
from router_core.tokenizer_router.upstream import UpstreamIncarnations
from router_core.traffic import BROADCAST, CONTROL, TrafficStats, message_bytes
from router_core.wire import Kind, frame_message
from router_core.wire.control import (
    ENGINE,
    REASON_BAD_KEY,
    REASON_UNKNOWN_WORKER,
    Acknowledgement,
    Deregistration,
    DrainCommand,
    Heartbeat,
    LoadSnapshot,
    RegistrationReply,
    WorkerRegistration,
)

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["RegistrationHandler"]

logger = logging.getLogger(__name__)

#: Deregistration reasons that label ``deregistrations`` as they are; any other counts as
#: ``other``: the reason is worker input, and a label must come from a closed set.
DEREGISTRATION_LABELS: Final = frozenset({"shutdown", "unspecified"})

#: Workers registered at once, at most; a registration beyond is refused (registry_full).
MAX_WORKERS: Final = 4096


class RegistrationHandler:
    """Registry handling for one router: registrations, heartbeats, departures, expiry."""

    def __init__(
        self,
        settings: RouterSettings,
        *,
        registry: WorkerRegistry,
        pause: PauseCoordinator,
        drain_marks: DrainMarks,
        persist: Callable[[], Persist],
        incarnation: int,
        upstream: UpstreamIncarnations,
        counters: Counters,
        traffic: TrafficStats,
        connect: Callable[[str], bool],
        peers: PeerCheck,
        latest_load: Callable[[], LoadSnapshot | None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._latest_load = latest_load
        self._registry = registry
        self._pause = pause
        self._drain_marks = drain_marks
        self._persist = persist
        self._incarnation = incarnation
        self._upstream = upstream
        self._counters = counters
        self._traffic = traffic
        self._connect = connect
        self._peers = peers
        self._own_endpoints = frozenset(msgspec.structs.astuple(settings.endpoints))

    # ------------------------------------------------------------------ messages

    def on_register(
        self, registration: WorkerRegistration, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``REGISTER``: add or refresh the worker and answer with the pause state and its
        secret (new, unless this repeats the registration of the same worker process); a
        worker with a drain mark is told to drain again right after the reply.

        Refused, with no reply: a bad worker id, address, host or version. Without the
        stack key: refused, and answered ``accepted=False, reason="bad_key"`` through a
        one-off socket, unless a registered worker holds that address (a forger must not
        make a real worker think it was refused)."""
        claimed = registration.worker_id
        if claimed == ENGINE or not valid_worker_id(claimed):
            return self._peers.refuse("bad_worker_id", claimed, at)
        if not self._usable_address(registration.address):
            return []
        if not self._peers.has_key(registration.key):
            self._peers.refuse("bad_key", claimed, at)
            if self._registry.by_address(registration.address) is not None:
                return []
            refusal = RegistrationReply(worker_id=claimed, accepted=False, reason=REASON_BAD_KEY)
            answer = frame_message(Kind.REGISTER_REPLY, refusal)
            return [Send(registration.address, answer, once=True)]
        if not valid_host(registration.host):
            return self._peers.refuse("bad_host", claimed, at)
        if not valid_version(registration.version):
            return self._peers.refuse("bad_version", claimed, at)
        before = self._registry.get(claimed)
        if before is None and len(self._registry) >= MAX_WORKERS:
            self._counters.add("rejected", "registry_full")
            return []
        if not self._connect(registration.address):
            self._counters.add("rejected", "bad_address")
            return []
        # A repeat from the same process keeps its secret (registrations are re-sent
        # until one is answered, so a new secret each time would make the heartbeats
        # sent in between look forged); a new process of the worker gets a new one.
        repeat = before is not None and before.same_process(registration)
        secret = before.secret if before is not None and repeat else new_secret()
        record, replaced = self._registry.register(registration, at.mono, secret)
        effects: list[Effect] = []
        for old in replaced:
            effects += self.depart(old, "replaced", at)
        state = self._pause.state
        if record.state == "starting":
            self._registry.transition(record, "paused" if state.paused else "serving")
        reply = RegistrationReply(
            worker_id=record.worker_id,
            accepted=True,
            paused=state.paused,
            pause_mode=state.mode,
            op_id=state.op_id,
            heartbeat_interval_s=self._settings.heartbeat_interval_s,
            incarnation=self._incarnation,
            secret=record.secret,
        )
        self._counters.add("registrations", "accepted")
        self._count_control(record.worker_id, frames)
        reply_frames = frame_message(Kind.REGISTER_REPLY, reply)
        effects.append(Send(record.address, reply_frames, traffic=(CONTROL, record.worker_id)))
        if record.worker_id in self._drain_marks and self._registry.command_drain(record):
            drain = frame_message(Kind.DRAIN, DrainCommand(record.worker_id, True))
            effects.append(
                Send(
                    record.address,
                    drain,
                    traffic=(CONTROL, record.worker_id),
                    counter=("drain_reapplied", "register", 1),
                )
            )
        load = self._latest_load()
        if load is not None:  # the engine's limits and weights, known from the start
            snapshot = msgspec.structs.replace(load, secret="")
            effects.append(
                Send(
                    record.address,
                    frame_message(Kind.LOAD, snapshot),
                    traffic=(BROADCAST, record.worker_id),
                )
            )
        return effects + self._upstream.tell(record)

    def on_heartbeat(
        self, heartbeat: Heartbeat, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``HEARTBEAT``: refresh a known worker (refused without its secret); ask an
        unknown one to register again."""
        record = self._registry.get(heartbeat.worker_id)
        if record is not None:
            if not matches(heartbeat.secret, record.secret):
                return self._peers.refuse("bad_secret", heartbeat.worker_id, at)
            self._registry.heartbeat(heartbeat, at.mono)
            self._count_control(heartbeat.worker_id, frames)
            return []
        if not valid_worker_id(heartbeat.worker_id):
            return self._peers.refuse("bad_worker_id", heartbeat.worker_id, at)
        address = heartbeat.address
        if address and not self._usable_address(address):
            return []  # counted as bad_address
        self._counters.add("rejected", "unknown_worker")
        if not address or self._registry.by_address(address) is not None:
            return []
        reply = RegistrationReply(
            worker_id=heartbeat.worker_id, accepted=False, reason=REASON_UNKNOWN_WORKER
        )
        return [Send(address, frame_message(Kind.REGISTER_REPLY, reply), once=True)]

    def on_deregister(
        self, leaving: Deregistration, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``DEREGISTER``: the worker left cleanly; forget it (refused without its secret)."""
        record = self._registry.get(leaving.worker_id)
        if record is None:
            self._counters.add("rejected", "unknown_worker")
            return []
        if not matches(leaving.secret, record.secret):
            return self._peers.refuse("bad_secret", leaving.worker_id, at)
        self._count_control(leaving.worker_id, frames)
        self._registry.deregister(leaving.worker_id)
        reason = leaving.reason or "unspecified"
        self._counters.add(
            "deregistrations", reason if reason in DEREGISTRATION_LABELS else "other"
        )
        effects = self.depart(record, "deregistered", at)
        if leaving.worker_id in self._drain_marks:  # it left: its drain is done
            self._drain_marks.unmark(leaving.worker_id)
            effects.insert(0, self._persist())
        return effects

    def on_ack(
        self, ack: Acknowledgement, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``ACK`` from a registered worker, with its secret (never in the engine's name),
        for the pause coordinator."""
        if ack.participant == ENGINE:
            self._counters.add("rejected", "ack_impersonation")
            return []
        record = self._registry.get(ack.participant)
        if record is None:
            self._counters.add("rejected", "unknown_worker")
            return []
        if not matches(ack.secret, record.secret):
            return self._peers.refuse("bad_secret", ack.participant, at)
        self._count_control(ack.participant, frames)
        return self._pause.acknowledge(ack, at)

    # ------------------------------------------------------------------ departures

    def expire(self, at: Instant) -> list[Effect]:
        """Every worker silent past the heartbeat timeout is dead and departs."""
        effects: list[Effect] = []
        for record in self._registry.expire(at.mono):
            logger.warning("worker %s missed heartbeats: dead", record.worker_id)
            self._counters.add("dead_workers", "heartbeat_timeout")
            effects += self.depart(record, "dead_worker", at)
        return effects

    def depart(self, record: WorkerRecord, reason: str, at: Instant) -> list[Effect]:
        """A worker left: remember why, close its socket, stop waiting for its acks."""
        self._registry.remember_departure(record, reason, at.mono)
        effects: list[Effect] = [Forget(record.address, reason)]
        return effects + self._pause.depart(record.worker_id, at)

    # ------------------------------------------------------------------ helpers

    def _usable_address(self, address: str) -> bool:
        """Whether the router may send to ``address`` (counted under rejected if not).

        It must pass the endpoint rules (loopback unless allowed) and must not be one of
        the router's own or the engine's endpoints.
        """
        if not valid_address(address):
            self._counters.add("rejected", "bad_address")
            return False
        try:
            check_endpoint(address, allow_remote=self._settings.allow_remote)
        except EndpointError:
            self._counters.add("rejected", "bad_address")
            return False
        if address in self._own_endpoints:
            self._counters.add("rejected", "bad_address")
            return False
        return True

    def _count_control(self, worker_id: str, frames: Sequence[FrameLike]) -> None:
        """Count a control message from a registered worker (route ``control``)."""
        if self._registry.get(worker_id) is not None:
            self._traffic.add(CONTROL, worker_id, 1, message_bytes(frames))
