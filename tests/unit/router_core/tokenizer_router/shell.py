"""An in-memory shell for the tokenizer router's core: no sockets, a clock the test moves.

:class:`CoreShell` builds a :class:`RouterCore`, feeds it messages framed exactly as a
worker or the engine frames them (so each socket's table decodes them), and records the
effects the core returns instead of carrying them out. It plays honest peers: a worker
registers with the shell's key and sends the secret its registration reply gave it, the
engine sends the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from router_core.control.table import ReplyTo
from router_core.endpoints import RouterEndpoints
from router_core.tokenizer_router.commands import COMMANDS, Handled
from router_core.tokenizer_router.core import RouterCore
from router_core.tokenizer_router.dispatch import InboundTable
from router_core.tokenizer_router.durable import DurableState
from router_core.tokenizer_router.effects import Answer, Effect, Forget, Instant, Send
from router_core.tokenizer_router.settings import RouterSettings
from router_core.wire import Header, Kind, decode_header, frame_message
from router_core.wire.control import (
    ENGINE,
    Acknowledgement,
    Deregistration,
    Heartbeat,
    LoadSnapshot,
    RegistrationReply,
    WorkerRegistration,
)

__all__ = [
    "ENDPOINTS",
    "KEY",
    "CoreShell",
    "address_of",
    "answers",
    "forgets",
    "payload_of",
    "sends",
]

ENDPOINTS = RouterEndpoints.in_run_dir("/run/sb")

#: A stack key, for a shell made with ``key=KEY``.
KEY = "k" * 64


def address_of(worker_id: str) -> str:
    """The return address a test worker registers with."""
    return f"ipc:///run/sb/worker-{worker_id}"


def payload_of(send: Send, struct: type[Any]) -> Any:
    """The single payload of a sent message, decoded as ``struct``."""
    return msgspec.msgpack.decode(send.frames[1], type=struct)


class CoreShell:
    """A router core, its clock, and what it asked for."""

    def __init__(
        self,
        *,
        refuse: Iterable[str] = (),
        heartbeat_timeout_s: float = 5.0,
        barrier_timeout_s: float = 5.0,
        incarnation: int = 1,
        restored: DurableState | None = None,
        key: str | None = None,
    ) -> None:
        settings = RouterSettings(
            endpoints=ENDPOINTS,
            heartbeat_timeout_s=heartbeat_timeout_s,
            barrier_timeout_s=barrier_timeout_s,
            key=key,
        )
        self.key = key or ""
        #: Each worker's secret, from its latest accepted registration reply.
        self.secrets: dict[str, str] = {}
        self.at = Instant(100.0, 1_700_000_000.0)
        refused = frozenset(refuse)
        self.core = RouterCore(
            settings,
            started=self.at,
            connect=lambda address: address not in refused,
            backlogs=lambda: {"engine": 0},
            incarnation=incarnation,
            restored=restored,
        )
        self._requests = 0

    def advance(self, seconds: float) -> Instant:
        """Move both clocks on by ``seconds``; the new instant."""
        self.at = Instant(self.at.mono + seconds, self.at.wall + seconds)
        return self.at

    # ------------------------------------------------------------------ inbound

    def deliver(self, table: InboundTable, kind: Kind, payload: msgspec.Struct) -> list[Effect]:
        """Frame ``payload`` as ``kind`` and hand it to ``table``; the effects."""
        frames = frame_message(kind, payload)
        return table.dispatch(decode_header(frames[0]), frames, self.at)

    def register(self, worker_id: str, address: str | None = None, **fields: Any) -> list[Effect]:
        """A worker registers (with the shell's key unless ``key`` is given); the secret
        of an accepted reply is kept for its later messages."""
        registration = WorkerRegistration(
            **{"key": self.key, "pid": 1, "host": "h"} | fields,
            worker_id=worker_id,
            address=address or address_of(worker_id),
        )
        effects = self.deliver(self.core.worker_messages, Kind.REGISTER, registration)
        for send in sends(effects):
            if decode_header(send.frames[0]).kind is Kind.REGISTER_REPLY:
                reply = payload_of(send, RegistrationReply)
                if reply.accepted and reply.worker_id == worker_id:
                    self.secrets[worker_id] = reply.secret
        return effects

    def heartbeat(self, worker_id: str, **fields: Any) -> list[Effect]:
        """A worker heartbeats (``state`` serving, and its secret, unless given)."""
        fields.setdefault("secret", self.secrets.get(worker_id, ""))
        beat = Heartbeat(worker_id=worker_id, address=address_of(worker_id), **fields)
        return self.deliver(self.core.worker_messages, Kind.HEARTBEAT, beat)

    def ack(self, participant: str, op_id: str, secret: str | None = None) -> list[Effect]:
        """A worker, or the engine on its own socket, acknowledges ``op_id`` (with the
        worker's secret or the engine's key unless ``secret`` is given)."""
        engine = participant == ENGINE
        table = self.core.engine_events if engine else self.core.worker_messages
        if secret is None:
            secret = self.key if engine else self.secrets.get(participant, "")
        ack = Acknowledgement(op_id=op_id, participant=participant, secret=secret)
        return self.deliver(table, Kind.ACK, ack)

    def deregister(self, worker_id: str, reason: str = "shutdown", **fields: Any) -> list[Effect]:
        """A worker leaves (with its secret unless given)."""
        fields.setdefault("secret", self.secrets.get(worker_id, ""))
        leaving = Deregistration(worker_id, reason, **fields)
        return self.deliver(self.core.worker_messages, Kind.DEREGISTER, leaving)

    def engine_load(self, **fields: Any) -> list[Effect]:
        """The engine reports its load (which also makes it live), with the key unless
        ``secret`` is given."""
        fields.setdefault("secret", self.key)
        return self.deliver(self.core.engine_events, Kind.LOAD, LoadSnapshot(**fields))

    def outputs(self, header: Header, frames: Sequence[bytes]) -> list[Effect]:
        """A batch on the router's outputs socket."""
        return self.core.outputs.dispatch(header, frames, self.at)

    # ------------------------------------------------------------------ commands

    def command(self, name: str, **args: Any) -> Handled:
        """Run control command ``name``; its reply and effects."""
        entry = COMMANDS[name]
        parsed = msgspec.convert(args, entry.command.args_type)
        self._requests += 1
        return entry.handler(self.core, parsed, ReplyTo((b"caller",), self._requests), self.at)

    def tick(self) -> list[Effect]:
        """Run the timers now."""
        effects, _ = self.core.tick(self.at)
        return effects


def sends(effects: Iterable[Effect]) -> list[Send]:
    """The sends among ``effects``, in order."""
    return [effect for effect in effects if isinstance(effect, Send)]


def answers(effects: Iterable[Effect]) -> list[Answer]:
    """The answers among ``effects``, in order."""
    return [effect for effect in effects if isinstance(effect, Answer)]


def forgets(effects: Iterable[Effect]) -> list[Forget]:
    """The sockets closed among ``effects``, in order."""
    return [effect for effect in effects if isinstance(effect, Forget)]
