"""The worker gateway's decisions: which remote workers it speaks for, as data.

The core sees each control message (routing id, the CURVE key's name, verb, the rest)
and the clock, and returns effects for the shell (:mod:`.gateway`) to carry out, in
order. It keeps one :class:`RemotePeer` per worker that said ``HELLO``: its return
address (where the shell listens for the worker's traffic on the control host) and the
key it was authenticated with. A worker id is bound to that key until the peer is
forgotten, so another authorised host cannot take over a worker id while it is in use.
A peer silent for ``idle_s`` is forgotten (its return address closed); a worker that
still lives gets ``WHO`` on its next message and says ``HELLO`` again.

Pure: no sockets, no clock of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from router_core.worker_gateway import frames as verbs
from router_core.worker_gateway.frames import address_for, worker_id_of

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["Count", "Effect", "Forget", "ForwardUp", "GatewayCore", "Listen", "RemotePeer", "Reply"]


@dataclass(frozen=True, slots=True)
class Reply:
    """Send ``frames`` to the control connection ``routing_id``."""

    routing_id: bytes
    frames: Sequence[bytes]


@dataclass(frozen=True, slots=True)
class ForwardUp:
    """Send ``frames`` (one protocol message) to the router's ``workers`` endpoint."""

    frames: Sequence[FrameLike]


@dataclass(frozen=True, slots=True)
class Listen:
    """Start listening at ``address`` for ``worker_id``'s traffic (routing id the id)."""

    worker_id: str
    address: str


@dataclass(frozen=True, slots=True)
class Forget:
    """Stop listening for ``worker_id`` and close its return address."""

    worker_id: str


@dataclass(frozen=True, slots=True)
class Count:
    """Add one to counter ``name`` for ``label``."""

    name: str
    label: str


Effect = Reply | ForwardUp | Listen | Forget | Count


@dataclass(slots=True)
class RemotePeer:
    """A worker the gateway speaks for."""

    address: str
    key_name: str
    last_seen: float


class GatewayCore:
    """Decides for ``prefix`` (the return-address prefix), at most ``max_peers`` remote
    workers, forgetting those silent for ``idle_s`` seconds."""

    def __init__(self, prefix: str, *, max_peers: int, idle_s: float) -> None:
        if max_peers <= 0 or idle_s <= 0:
            raise ValueError("max_peers and idle_s must be positive")
        self.prefix = prefix
        self.max_peers = max_peers
        self.idle_s = idle_s
        self.peers: dict[str, RemotePeer] = {}

    def on_control(
        self, routing_id: bytes, key_name: str, message: Sequence[FrameLike], now: float
    ) -> list[Effect]:
        """Effects of one control message (``message[0]`` the verb)."""
        verb = _as_bytes(message[0]) if message else b""
        if verb == verbs.UP:
            return self._up(routing_id, key_name, message[1:], now)
        if verb == verbs.HELLO and len(message) == 2:
            return self._hello(routing_id, key_name, _as_bytes(message[1]), now)
        if verb == verbs.INFO and len(message) == 1:
            return [Reply(routing_id, [verbs.PREFIX, self.prefix.encode()])]
        return [Count("rejected", "gateway_verb")]

    def _hello(self, routing_id: bytes, key_name: str, address: bytes, now: float) -> list[Effect]:
        worker_id = worker_id_of(routing_id)
        if worker_id is None:
            return self._refuse(routing_id, "bad_id")
        expected = address_for(self.prefix, worker_id)
        if address != expected.encode():
            return self._refuse(routing_id, "bad_address")
        peer = self.peers.get(worker_id)
        if peer is not None:
            if peer.key_name != key_name:
                return self._refuse(routing_id, "id_taken")
            peer.last_seen = now
            return [Reply(routing_id, [verbs.WELCOME, address])]
        if len(self.peers) >= self.max_peers:
            return self._refuse(routing_id, "full")
        self.peers[worker_id] = RemotePeer(expected, key_name, now)
        return [
            Listen(worker_id, expected),
            Reply(routing_id, [verbs.WELCOME, address]),
            Count("remote_workers", "welcomed"),
        ]

    def _up(
        self, routing_id: bytes, key_name: str, message: Sequence[FrameLike], now: float
    ) -> list[Effect]:
        worker_id = worker_id_of(routing_id)
        peer = None if worker_id is None else self.peers.get(worker_id)
        if peer is None:
            return [Reply(routing_id, [verbs.WHO]), Count("rejected", "gateway_unknown_peer")]
        if peer.key_name != key_name:
            return self._refuse(routing_id, "id_taken")
        if not message:
            return [Count("rejected", "gateway_empty")]
        peer.last_seen = now
        return [ForwardUp(message)]

    def _refuse(self, routing_id: bytes, reason: str) -> list[Effect]:
        return [Reply(routing_id, [verbs.REFUSED, reason.encode()]), Count("refused", reason)]

    def on_tick(self, now: float) -> list[Effect]:
        """Forget every peer silent for ``idle_s``."""
        idle = [wid for wid, peer in self.peers.items() if now - peer.last_seen >= self.idle_s]
        effects: list[Effect] = []
        for worker_id in idle:
            del self.peers[worker_id]
            effects += [Forget(worker_id), Count("remote_workers", "forgotten")]
        return effects


def _as_bytes(frame: FrameLike) -> bytes:
    return frame if isinstance(frame, bytes) else frame.bytes
