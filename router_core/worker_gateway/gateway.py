"""The worker gateway: where workers on other hosts meet the control host's fabric.

A remote worker connects to the gateway and to nothing else (:mod:`.frames`): a DEALER
to the gateway's ``control`` ROUTER and a PUSH to its ``requests`` PULL, both CURVE,
only keys in the authorised-keys file let in (:mod:`router_core.zap`). For every worker
that says ``HELLO`` the gateway listens on the control host at the worker's return
address (an ``ipc://`` path), so the router and the detokenizers send to a remote worker
exactly as to a local one; what arrives there goes down the worker's own connection.
Upwards, control messages go to the router's ``workers`` endpoint and requests to its
``requests`` endpoint, unchanged.

Nothing waits without a bound and no peer stalls another: a remote worker whose
connection is full holds one message and its return address is not read until it
drains (the senders' own bounded backlogs take the rest); a router that cannot take a
message holds it and the gateway stops reading that direction until it can, which is
how the engine's back-pressure reaches remote workers. Decisions are :mod:`.core`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import zmq

from router_core.counters import Counters
from router_core.curve import AuthorisedKeys
from router_core.curve_files import read_key_pair
from router_core.inbound import BUDGET
from router_core.loop import LoopResources, PollLoop
from router_core.transport import (
    MAX_FRAMES,
    FrameLike,
    MalformedMessage,
    bind,
    close_bound,
    connect,
    ipc_in_use,
    recv_message,
    send_frames,
)
from router_core.worker_gateway import frames as verbs
from router_core.worker_gateway.core import (
    Count,
    Effect,
    Forget,
    ForwardUp,
    GatewayCore,
    Listen,
    Reply,
)
from router_core.worker_gateway.settings import GatewaySettings
from router_core.zap import ZapHandler, curve_server

__all__ = ["WorkerGateway"]

logger = logging.getLogger(__name__)

#: How often held messages are retried while something is held.
_RETRY_S: Final = 0.005
#: How often idle peers are looked for.
_SWEEP_S: Final = 1.0
_UP_LINGER_MS: Final = 500


@dataclass(slots=True)
class _Return:
    """One remote worker's return address: the PULL there and what waits to go down."""

    routing_id: bytes
    address: str
    sock: zmq.Socket[bytes]
    held: Sequence[FrameLike] | None = None


@dataclass(slots=True)
class _Held:
    """Messages a full router socket could not take yet, one per direction."""

    requests: Sequence[FrameLike] | None = None
    control: Sequence[FrameLike] | None = None
    #: Remote workers whose connection was full, by worker id.
    returns: dict[str, _Return] = field(default_factory=dict)


class WorkerGateway:
    """Runs one gateway until :meth:`request_stop`; ``on_second`` runs about once a
    second on the loop (the process exports its counters there)."""

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        counters: Counters | None = None,
        on_second: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.counters = counters if counters is not None else Counters()
        self.core = GatewayCore(
            settings.return_prefix, max_peers=settings.max_peers, idle_s=settings.idle_s
        )
        self._on_second = on_second
        self._loop = PollLoop()
        self._returns: dict[str, _Return] = {}
        self._held = _Held()
        self._next_sweep = 0.0
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._control: zmq.Socket[bytes] | None = None
        self._up: dict[str, zmq.Socket[bytes]] = {}

    def request_stop(self) -> None:
        """Ask :meth:`run` to return (any thread, signal-safe)."""
        self._loop.request_stop()

    def run(self, ready: Callable[[], None] | None = None) -> None:
        """Bind, serve until stopped, close everything; ``ready`` runs once bound.

        Raises ``KeyFileError`` for an unusable key pair or authorised-keys file and
        ``zmq.ZMQError`` when a bind fails, before serving anything.
        """
        s = self.settings
        keys = AuthorisedKeys(
            s.authorised_keys_file, on_invalid=lambda: self.counters.add("keys_file", "invalid")
        )
        keys.load()
        pair = read_key_pair(s.key_pair_file)

        def make_curve(sock: zmq.Socket[bytes]) -> None:
            curve_server(sock, pair)
            # No pings from here (limits.ZMTP_HEARTBEAT_IVL_MS says why): the workers'
            # pings carry a TTL, so a connection whose network went away is dropped in
            # seconds all the same, and what is meant for it is refused (peer_gone).
            if sock.socket_type == zmq.ROUTER:
                # A full or gone remote worker must be seen (EAGAIN, EHOSTUNREACH).
                sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
                # A worker back from a network loss may reconnect before this side drops
                # the old connection: the new one takes the id over, or it would never be
                # read (the core still binds each id to one key).
                sock.setsockopt(zmq.ROUTER_HANDOVER, 1)

        _remove_stale_returns(s.return_prefix)
        with LoopResources(s, self.counters) as resources:
            context = self._context = resources.context
            zap = ZapHandler(context, keys, self.counters)
            zap.open()
            try:
                control = resources.bind(zmq.ROUTER, s.control_listen, make_curve)
                requests_in = resources.bind(zmq.PULL, s.requests_listen, make_curve)
                self._control = control
                self._up = {
                    "requests": connect(context, zmq.PUSH, s.router.requests, hwm=s.hwm),
                    "control": connect(context, zmq.PUSH, s.router.workers, hwm=s.hwm),
                }
                self._loop.watch(zap.socket, zap.handle_ready)
                self._loop.watch(
                    control, self._read_control, gate=lambda: self._held.control is None
                )
                self._loop.watch(
                    requests_in,
                    lambda: self._receive(requests_in, self._send_up_request),
                    gate=lambda: self._held.requests is None,
                )
                if ready is not None:
                    ready()
                self._loop.run(lambda: [], self._tick)
            finally:
                self._close_returns()
                for sock in self._up.values():
                    # A last deregistration forwarded while stopping still reaches the router.
                    sock.close(linger=_UP_LINGER_MS)
                self._up.clear()
                zap.close()

    # ------------------------------------------------------------------ upwards

    def _receive(self, sock: zmq.Socket[bytes], forward: Callable[[list[FrameLike]], bool]) -> None:
        """Hand up to one budget of waiting messages to ``forward``, counting malformed
        ones; stop early when ``forward`` says it had to hold one (False)."""
        for _ in range(BUDGET):
            try:
                frames = recv_message(sock)
            except zmq.Again:
                return
            except MalformedMessage as exc:
                self.counters.add("rejected", exc.reason)
                continue
            if not forward(frames):
                return

    def _send_up_request(self, frames: Sequence[FrameLike]) -> bool:
        if not send_frames(self._up["requests"], frames):
            self._held.requests = frames
            return False
        self.counters.add("forwarded", "requests")
        return True

    def _read_control(self) -> None:
        sock = self._control
        assert sock is not None
        now = time.monotonic()
        for _ in range(BUDGET):
            try:
                message = _recv_enveloped(sock)
            except zmq.Again:
                return
            except MalformedMessage as exc:
                self.counters.add("rejected", exc.reason)
                continue
            routing_id, key_name, rest = message
            self._apply(self.core.on_control(routing_id, key_name, rest, now))
            if self._held.control is not None:
                return

    # ------------------------------------------------------------------ effects

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, ForwardUp):
                if send_frames(self._up["control"], effect.frames):
                    self.counters.add("forwarded", "control")
                else:
                    self._held.control = effect.frames
            elif isinstance(effect, Reply):
                self._reply(effect.routing_id, effect.frames)
            elif isinstance(effect, Listen):
                self._listen(effect.worker_id, effect.address)
            elif isinstance(effect, Forget):
                self._forget(effect.worker_id, "peer_forgotten")
            elif isinstance(effect, Count):
                self.counters.add(effect.name, effect.label)

    def _reply(self, routing_id: bytes, frames: Sequence[bytes]) -> None:
        assert self._control is not None
        try:
            if not send_frames(self._control, [routing_id, *frames]):
                self.counters.add("dropped", "gateway_reply")
        except zmq.ZMQError:  # EHOSTUNREACH: that connection is gone already
            self.counters.add("dropped", "peer_gone")

    def _listen(self, worker_id: str, address: str) -> None:
        assert self._context is not None
        try:
            sock = bind(self._context, zmq.PULL, address, hwm=self.settings.hwm)
        except zmq.ZMQError as exc:
            logger.error("gateway: cannot listen at %s for %s: %s", address, worker_id, exc)
            self.core.peers.pop(worker_id, None)
            self.counters.add("refused", "listen_failed")
            self._reply(worker_id.encode(), [verbs.REFUSED, b"listen_failed"])
            return
        entry = _Return(worker_id.encode(), address, sock)
        self._returns[worker_id] = entry
        self._loop.watch(
            sock,
            lambda: self._receive(
                sock, lambda frames: self._send_down(entry, [entry.routing_id, verbs.DOWN, *frames])
            ),
            gate=lambda: entry.held is None,
        )
        logger.info("gateway: speaking for remote worker %s", worker_id)

    def _forget(self, worker_id: str, reason: str) -> None:
        entry = self._returns.pop(worker_id, None)
        if entry is None:
            return
        if entry.held is not None:
            self.counters.add("dropped", reason)
        self._held.returns.pop(worker_id, None)
        self._loop.unwatch(entry.sock)
        close_bound(entry.sock, entry.address)
        logger.info("gateway: forgot remote worker %s (%s)", worker_id, reason)

    def _close_returns(self) -> None:
        for worker_id in list(self._returns):
            self._forget(worker_id, "closed")

    # ------------------------------------------------------------------ downwards

    def _send_down(self, entry: _Return, message: Sequence[FrameLike]) -> bool:
        """Send one message down; False (held) when the worker's connection is full."""
        assert self._control is not None
        try:
            if send_frames(self._control, message):
                entry.held = None
                self.counters.add("forwarded", "down")
                return True
        except zmq.ZMQError:  # EHOSTUNREACH: not connected now; its link copes with gaps
            entry.held = None
            self.counters.add("dropped", "peer_gone")
            return True
        entry.held = message
        self._held.returns[entry.routing_id.decode()] = entry
        return False

    # ------------------------------------------------------------------ timers

    def _tick(self, now: float) -> float:
        held = self._held
        if held.requests is not None and send_frames(self._up["requests"], held.requests):
            held.requests = None
            self.counters.add("forwarded", "requests")
        if held.control is not None and send_frames(self._up["control"], held.control):
            held.control = None
            self.counters.add("forwarded", "control")
        for worker_id, entry in list(held.returns.items()):
            if entry.held is None or self._send_down(entry, entry.held):
                del held.returns[worker_id]
        if now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_S
            self._apply(self.core.on_tick(now))
            if self._on_second is not None:
                self._on_second()
        busy = held.requests is not None or held.control is not None or held.returns
        return now + _RETRY_S if busy else self._next_sweep


def _remove_stale_returns(prefix: str) -> None:
    """Remove the return addresses a killed gateway left under ``prefix`` (socket files
    nobody listens on); the workers they were for say HELLO again."""
    base = Path(prefix.removeprefix("ipc://"))
    for path in base.parent.glob(f"{base.name}*"):
        if path.is_socket() and not ipc_in_use(str(path)):
            path.unlink(missing_ok=True)


def _recv_enveloped(sock: zmq.Socket[bytes]) -> tuple[bytes, str, list[FrameLike]]:
    """One ROUTER message: the routing id, the CURVE key's name (ZAP's user id) and the
    frames after the routing id. ``zmq.Again`` if none waits; :class:`MalformedMessage`
    (every frame consumed) for one with no frame after the routing id or too many."""
    head = sock.recv(zmq.NOBLOCK, copy=False)
    if not head.more:
        raise MalformedMessage("gateway_empty")
    verb = sock.recv(copy=False)
    # ZeroMQ attaches the ZAP user id (the key's name) to every frame of the connection.
    key_name = str(verb.get("User-Id") or "")
    frames: list[FrameLike] = [verb.bytes]
    last = verb
    while last.more:
        if len(frames) > MAX_FRAMES:
            while sock.getsockopt(zmq.RCVMORE):
                sock.recv()
            raise MalformedMessage("too_many_frames")
        last = sock.recv(copy=False)
        frames.append(last)
    return head.bytes, key_name, frames
