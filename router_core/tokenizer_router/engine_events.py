"""What the tokenizer router knows of the engine, and the engine's events.

:class:`EngineState` is when the engine was last heard from and its latest load;
:class:`EngineEvents` handles the two messages the engine sends the router
(acknowledgements and load snapshots). An engine the router has not seen in the current
pause state yet (the first load report after this router started, or one from a new
engine incarnation) is sent the current state's command again. A router with a stack
key refuses both messages unless their ``secret`` is that key (``rejected{bad_engine_key}``):
anyone else could otherwise make the engine look live, acknowledge in its name, or end
every worker's requests with a snapshot of a new ``engine_started_ns``. Snapshots are
kept and passed on without the key. Pure: time comes in as an :class:`Instant`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from router_core.counters import Counters
from router_core.registry import WorkerRegistry
from router_core.tokenizer_router.effects import Effect, Instant, Send
from router_core.tokenizer_router.peers import PeerCheck
from router_core.traffic import BROADCAST
from router_core.wire import encode_payload
from router_core.wire.control import ENGINE, Acknowledgement, LoadSnapshot
from router_core.wire.engine_commands import CommandReply

if TYPE_CHECKING:
    from router_core.tokenizer_router.engine_requests import EngineRequests
    from router_core.tokenizer_router.pause import PauseCoordinator
    from router_core.tokenizer_router.weight_updates import WeightUpdates
    from router_core.transport import FrameLike

__all__ = ["EngineEvents", "EngineState"]


@dataclass
class EngineState:
    """The engine as the router last heard from it (monotonic seconds)."""

    timeout_s: float
    #: The latest engine event (an acknowledgement or a load snapshot).
    seen_at: float | None = None
    latest_load: LoadSnapshot | None = None
    load_received_at: float | None = None
    #: The ``engine_started_ns`` last sent the current pause state (None: none yet).
    brought_in_step: int | None = None

    def is_live(self, now: float) -> bool:
        """Whether the engine has sent an event within ``timeout_s``."""
        return self.seen_at is not None and now - self.seen_at <= self.timeout_s


class EngineEvents:
    """Handlers of the engine's events socket."""

    def __init__(
        self,
        engine: EngineState,
        pause: PauseCoordinator,
        registry: WorkerRegistry,
        counters: Counters,
        peers: PeerCheck,
        *,
        requests: EngineRequests,
        weights: WeightUpdates,
    ) -> None:
        self._engine = engine
        self._requests = requests
        self._weights = weights
        self._pause = pause
        self._registry = registry
        self._counters = counters
        self._peers = peers

    def on_ack(
        self, ack: Acknowledgement, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``ACK``: the engine applied a pause or continue; only the engine may send it."""
        if ack.participant != ENGINE:
            self._counters.add("rejected", "ack_impersonation")
            return []
        if not self._peers.has_key(ack.secret):
            return self._peers.refuse("bad_engine_key", ENGINE, at)
        self._engine.seen_at = at.mono
        return self._pause.acknowledge(ack, at)

    def on_command_reply(
        self, reply: CommandReply, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``COMMAND_REPLY``: the engine's answer to an operator's command."""
        if not self._peers.has_key(reply.secret):
            return self._peers.refuse("bad_engine_key", ENGINE, at)
        self._engine.seen_at = at.mono
        return self._requests.on_reply(reply, at)

    def on_load(
        self, snapshot: LoadSnapshot, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``LOAD``: keep the snapshot and forward it to every worker (its header untouched,
        its payload without the key); bring an engine this router has not seen in the
        pause state into it."""
        if not self._peers.has_key(snapshot.secret):
            return self._peers.refuse("bad_engine_key", ENGINE, at)
        if snapshot.secret:  # the key stops here: workers and views never see it
            snapshot = msgspec.structs.replace(snapshot, secret="")
            frames = [frames[0], encode_payload(snapshot)]
        engine = self._engine
        engine.seen_at = engine.load_received_at = at.mono
        engine.latest_load = snapshot
        effects: list[Effect] = []
        if engine.brought_in_step != snapshot.engine_started_ns:
            if engine.brought_in_step is not None:  # a restart: what it held is gone
                effects += self._requests.engine_restarted(at)
            engine.brought_in_step = snapshot.engine_started_ns
            command = self._pause.engine_command()
            if command is not None:
                effects.append(command)
        effects += self._weights.on_engine_version(snapshot.weight_version)
        effects += [
            Send(record.address, frames, traffic=(BROADCAST, record.worker_id))
            for record in self._registry.workers()
        ]
        return effects
