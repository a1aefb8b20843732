"""The tokenizer router's core: all of its state and decisions, and no sockets.

:class:`RouterCore` wires the pure pieces — the registry handler, the pause coordinator,
the engine's events, the backward path and the read-only view — and offers one table
per inbound socket (:attr:`worker_messages`, :attr:`engine_events`, :attr:`outputs`),
the control commands (:mod:`router_core.tokenizer_router.commands`) and the timers
(:meth:`tick`). Each of them takes decoded input and the time and returns the effects
for the shell to carry out, so the whole router is driven in-process by tests.

State that must outlive the process (the pause state, the operation counter, the drain
marks) comes in as ``restored`` and goes out as :class:`Persist` effects carrying
:meth:`RouterCore.durable_state`; ``incarnation`` is this start's.

Two probes come from the shell: ``connect(address)`` opens the socket to a worker that
registers (False if libzmq refuses the address) and ``backlogs()`` reads the queues of
its destinations.
"""

from __future__ import annotations

from collections.abc import Callable

from router_core.counters import Counters
from router_core.registry import WorkerRegistry
from router_core.tokenizer_router.backward import BackwardPath
from router_core.tokenizer_router.dispatch import Decoded, InboundTable
from router_core.tokenizer_router.durable import DrainMarks, DurableState
from router_core.tokenizer_router.effects import Effect, Instant, Persist
from router_core.tokenizer_router.engine_events import EngineEvents, EngineState
from router_core.tokenizer_router.engine_requests import EngineRequests
from router_core.tokenizer_router.pause import PauseCoordinator
from router_core.tokenizer_router.peers import PeerCheck
from router_core.tokenizer_router.registration import RegistrationHandler
from router_core.tokenizer_router.settings import RouterSettings
from router_core.tokenizer_router.upstream import UpstreamIncarnations
from router_core.tokenizer_router.view import RouterView
from router_core.tokenizer_router.weight_updates import WeightUpdates
from router_core.traffic import TrafficStats
from router_core.wire import Kind
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    Heartbeat,
    LoadSnapshot,
    UpstreamIncarnation,
    WorkerRegistration,
)
from router_core.wire.engine_commands import CommandReply

__all__ = ["RouterCore"]


class RouterCore:
    """One tokenizer router's state and handlers; ``started`` is when the router started."""

    def __init__(
        self,
        settings: RouterSettings,
        *,
        started: Instant,
        connect: Callable[[str], bool],
        backlogs: Callable[[], dict[str, int]],
        incarnation: int = 0,
        restored: DurableState | None = None,
    ) -> None:
        self.settings = settings
        self.started = started
        self.incarnation = incarnation
        #: Workers an operator drained: drained again when they (re-)register.
        self.drain_marks = DrainMarks(() if restored is None else restored.drained)
        self.counters = Counters()
        #: The stack key peers must present (none: they are not authenticated).
        self.peers = PeerCheck(settings.key, self.counters)
        self.traffic = TrafficStats()
        self.registry = WorkerRegistry(settings.heartbeat_timeout_s)
        self.engine = EngineState(timeout_s=settings.engine_timeout_s)
        self.pause = PauseCoordinator(
            self.registry,
            self.engine,
            self.counters,
            barrier_timeout_s=settings.barrier_timeout_s,
            started_wall=started.wall,
            incarnation=incarnation,
            restored=restored,
        )
        #: The output path's incarnations, told to the workers.
        self.upstream = UpstreamIncarnations(self.registry, self.counters, self.peers)
        self.registration = RegistrationHandler(
            settings,
            registry=self.registry,
            pause=self.pause,
            drain_marks=self.drain_marks,
            persist=self.persist,
            incarnation=incarnation,
            upstream=self.upstream,
            counters=self.counters,
            traffic=self.traffic,
            connect=connect,
            peers=self.peers,
            latest_load=lambda: self.engine.latest_load,
        )
        self.backward = BackwardPath(self.registry, self.counters, self.traffic)
        self.view = RouterView(
            registry=self.registry,
            pause=self.pause,
            engine=self.engine,
            counters=self.counters,
            traffic=self.traffic,
            backlogs=backlogs,
            started=started,
        )
        registration = self.registration
        #: The operators' engine commands waiting for the engine's answer.
        self.engine_requests = EngineRequests(incarnation, self.counters)
        #: The weights serving and the live update in progress, if any.
        self.weights = WeightUpdates(
            self.pause,
            self.engine_requests,
            self.engine,
            self.counters,
            persist=self.persist,
            version="" if restored is None else restored.weight_version,
            model="" if restored is None else restored.weight_model,
            resume_owed=restored is not None and restored.resume_owed,
        )
        engine_events = EngineEvents(
            self.engine,
            self.pause,
            self.registry,
            self.counters,
            self.peers,
            requests=self.engine_requests,
            weights=self.weights,
        )
        #: The workers' control socket: registration, liveness, acknowledgements.
        self.worker_messages = InboundTable(
            {
                Kind.REGISTER: Decoded(WorkerRegistration, registration.on_register),
                Kind.HEARTBEAT: Decoded(Heartbeat, registration.on_heartbeat),
                Kind.DEREGISTER: Decoded(Deregistration, registration.on_deregister),
                Kind.ACK: Decoded(Acknowledgement, registration.on_ack),
                Kind.UPSTREAM: Decoded(UpstreamIncarnation, self.upstream.on_upstream),
            },
            self.counters,
        )
        #: The engine's events socket: its acknowledgements and load snapshots.
        self.engine_events = InboundTable(
            {
                Kind.ACK: Decoded(Acknowledgement, engine_events.on_ack),
                Kind.LOAD: Decoded(LoadSnapshot, engine_events.on_load),
                Kind.COMMAND_REPLY: Decoded(CommandReply, engine_events.on_command_reply),
            },
            self.counters,
        )
        #: The outputs socket (``--outputs-via router``): batches back to the workers.
        self.outputs = InboundTable(self.backward.entries(), self.counters)
        self._next_expiry_check = 0.0

    def durable_state(self) -> DurableState:
        """What a restarted router must start from, as of now."""
        state = self.pause.state
        return DurableState(
            incarnation=self.incarnation,
            paused=state.paused,
            mode=state.mode,
            op_id=state.op_id,
            seq=self.pause.barrier.last_seq,
            since=self.pause.state_since,
            drained=self.drain_marks.ids(),
            weight_version=self.weights.version,
            weight_model=self.weights.model,
            resume_owed=self.weights.resume_owed,
        )

    def persist(self) -> Persist:
        """The effect that saves :meth:`durable_state` (put it before the sends it covers)."""
        return Persist(self.durable_state())

    def worker_label(self, address: str) -> str:
        """The id of the worker at ``address`` for metric labels (``unknown`` if none)."""
        record = self.registry.by_address(address)
        return "unknown" if record is None else record.worker_id

    def next_due(self) -> float:
        """When a timer is next due (monotonic): the heartbeat expiry check, or the
        earliest barrier or engine command deadline. Cheap, so the shell asks it every
        loop iteration."""
        deadlines = (self.pause.next_deadline(), self.engine_requests.next_deadline())
        return min([self._next_expiry_check, *(each for each in deadlines if each is not None)])

    def tick(self, at: Instant) -> tuple[list[Effect], float]:
        """Run the timers: heartbeat expiry (a few times per timeout) and barrier
        deadlines. Returns their effects and when the next timer is due (monotonic)."""
        effects: list[Effect] = []
        if at.mono >= self._next_expiry_check:
            effects += self.registration.expire(at)
            interval = min(0.25, self.settings.heartbeat_timeout_s / 4)
            self._next_expiry_check = at.mono + interval
        effects += self.pause.expire(at)
        effects += self.engine_requests.expire(at)
        effects += self.weights.tick(at)
        return effects, self.next_due()
