"""What every routing loop shares: a stop flag, polling inbound sockets and flushing
backlogged destinations, with timers, in one thread that always reaches its ``finally``
(:class:`PollLoop`); and what such a loop serves with, from bind to drain
(:class:`LoopResources`).

Serving, as both routers and the detokenizer do it::

    with LoopResources(settings, counters, context) as resources:
        targets = resources.destinations()
        inbound = resources.bind(zmq.PULL, endpoint)
        loop.watch(inbound, lambda: drain(inbound, handle, counters))
        loop.run(resources.backlogged, on_tick)
    # destinations drained and closed, bound sockets closed (ipc files removed),
    # the context termed if LoopResources made it
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Final, Protocol

import zmq

from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.inbound import BoundSockets

__all__ = [
    "MAX_CONTEXT_SOCKETS",
    "LoopResources",
    "LoopSettings",
    "PollLoop",
    "raise_open_file_limit",
]

#: The longest a loop sleeps in poll, so a stop request is seen promptly.
MAX_POLL_MS = 100


class PollLoop:
    """Polls ``inbound`` for input and backlogged destinations for room to send."""

    def __init__(self) -> None:
        #: A plain flag, not a threading.Event: Event.set takes a lock, and a second
        #: SIGTERM arriving while a first handler held it deadlocked a stopping router.
        self._stop = False
        self._poller = zmq.Poller()
        self._handlers: dict[zmq.Socket[bytes], Callable[[], object]] = {}
        self._gates: dict[zmq.Socket[bytes], tuple[Callable[[], bool], list[bool]]] = {}

    def watch(
        self,
        sock: zmq.Socket[bytes],
        on_readable: Callable[[], object],
        gate: Callable[[], bool] | None = None,
    ) -> None:
        """Call ``on_readable`` whenever ``sock`` has input.

        With a ``gate``, the socket is only read while ``gate()`` is true; otherwise its
        input stays queued in ZeroMQ, which pushes back on the senders.
        """
        self._handlers[sock] = on_readable
        self._poller.register(sock, zmq.POLLIN)
        if gate is not None:
            self._gates[sock] = (gate, [True])

    def unwatch(self, sock: zmq.Socket[bytes]) -> None:
        """Stop watching ``sock`` (before it is closed); nothing if it was not watched."""
        if self._handlers.pop(sock, None) is not None:
            self._poller.unregister(sock)
        self._gates.pop(sock, None)

    def _apply_gates(self) -> None:
        for sock, (gate, is_open) in self._gates.items():
            wanted = gate()
            if wanted != is_open[0]:
                self._poller.register(sock, zmq.POLLIN if wanted else 0)
                is_open[0] = wanted

    def request_stop(self) -> None:
        """Ask the loop to return after its current iteration (any thread, signal-safe)."""
        self._stop = True

    @property
    def stopping(self) -> bool:
        """Whether a stop has been requested."""
        return self._stop

    def run(
        self,
        backlogged: Callable[[], Iterable[Destination]],
        on_tick: Callable[[float], float | None],
    ) -> None:
        """Loop until stopped.

        ``on_tick(now)`` runs every iteration and returns when it next needs to run
        (monotonic seconds) or None.
        """
        next_tick: float | None = None
        while not self._stop:
            # Capture the sockets now: a handler may discard a destination meanwhile.
            waiting = [(dest, dest.socket) for dest in backlogged()]
            timeout_ms = MAX_POLL_MS
            if next_tick is not None:
                timeout_ms = max(0, min(MAX_POLL_MS, int((next_tick - time.monotonic()) * 1000)))
            for _, sock in waiting:
                self._poller.register(sock, zmq.POLLOUT)
            self._apply_gates()
            try:
                ready = dict(self._poller.poll(timeout_ms))
            finally:
                for _, sock in waiting:
                    self._poller.unregister(sock)
            for dest, sock in waiting:
                if ready.get(sock, 0) & zmq.POLLOUT:
                    dest.flush()
            # By what is ready, not by every watched socket: a gateway watches one socket
            # per remote worker, and a handler may unwatch another socket meanwhile.
            handlers = self._handlers
            for sock, events in ready.items():
                if events & zmq.POLLIN:
                    handler = handlers.get(sock)
                    if handler is not None:
                        handler()
            next_tick = on_tick(time.monotonic())


#: Sockets a router's context may hold: every worker's PUSH (4096 workers at most), the
#: one-off sockets still lingering (256 at most) and the router's own, with room over.
MAX_CONTEXT_SOCKETS: Final = 8192
#: Descriptors a socket may take: its mailbox, and the connection of a connected PUSH
#: (each worker also holds two connections to the router's bound PULLs).
FDS_PER_SOCKET: Final = 3


def raise_open_file_limit(wanted: int) -> int:
    """Raise this process's soft limit on open files towards ``wanted`` (at most the hard
    limit; never lowered); the soft limit now. A common default of 1024 would refuse
    sockets long before a router's thousands of workers."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


class LoopSettings(Protocol):
    """The limits :class:`LoopResources` reads (every router's and the detokenizer's
    settings have them)."""

    @property
    def hwm(self) -> int:
        """High-water mark of every socket."""

    @property
    def allow_remote(self) -> bool:
        """Whether a bind may use a non-loopback endpoint."""

    @property
    def backlog_limit(self) -> int:
        """Messages each destination queues while its peer cannot take them."""

    @property
    def drain_timeout_s(self) -> float:
        """How long each destination set drains its backlogs on exit."""


class LoopResources:
    """A poll loop's zmq context, bound sockets and destination sets, for one ``with``.

    Entering makes a context unless one was given. Leaving, also on an exception (which
    propagates): every destination set drains its backlogs (each set within
    ``drain_timeout_s``, in the order they were made) and closes; then every bound socket
    closes and its ipc file is removed; then the context is termed if it was made here.
    A later step runs even when an earlier one raised.
    """

    def __init__(
        self,
        settings: LoopSettings,
        counters: Counters,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self._settings = settings
        self._counters = counters
        self._given_context = context
        self._context: zmq.Context[zmq.Socket[bytes]] | None = None
        self._bound: BoundSockets | None = None
        self._destination_sets: list[DestinationSet] = []

    @property
    def context(self) -> zmq.Context[zmq.Socket[bytes]]:
        """The context every socket is made in (only inside the ``with``)."""
        if self._context is None:
            raise RuntimeError("LoopResources is used only inside its with block")
        return self._context

    def bind(
        self,
        socket_type: int,
        endpoint: str,
        prepare: Callable[[zmq.Socket[bytes]], None] | None = None,
    ) -> zmq.Socket[bytes]:
        """Bind a socket of ``socket_type`` at ``endpoint`` (loopback-only unless allowed),
        ``prepare`` run on it before the bind; it is closed on exit."""
        if self._bound is None:
            raise RuntimeError("LoopResources is used only inside its with block")
        return self._bound.bind(socket_type, endpoint, prepare)

    def destinations(self) -> DestinationSet:
        """A new destination set (counting drops in ``counters``), drained on exit."""
        settings = self._settings
        destinations = DestinationSet(
            self.context, self._counters, hwm=settings.hwm, backlog_limit=settings.backlog_limit
        )
        self._destination_sets.append(destinations)
        return destinations

    def backlogged(self) -> list[Destination]:
        """Destinations of every set with queued messages (``PollLoop.run``'s ``backlogged``)."""
        sets = self._destination_sets
        if len(sets) == 1:
            return sets[0].backlogged()
        return [dest for destinations in sets for dest in destinations.backlogged()]

    def __enter__(self) -> LoopResources:
        if self._context is not None:
            raise RuntimeError("LoopResources is already in use")
        context = self._given_context
        if context is None:
            context = zmq.Context()
            # libzmq's default of 1023 sockets per context silently capped a router at
            # about a thousand workers (one PUSH each): registrations beyond it failed.
            context.set(zmq.MAX_SOCKETS, MAX_CONTEXT_SOCKETS)
            raise_open_file_limit(MAX_CONTEXT_SOCKETS * FDS_PER_SOCKET)
        self._context = context
        settings = self._settings
        self._bound = BoundSockets(context, hwm=settings.hwm, allow_remote=settings.allow_remote)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        sets, self._destination_sets = self._destination_sets, []
        bound, self._bound = self._bound, None
        context, self._context = self._context, None
        try:
            self._drain(sets)
        finally:
            try:
                if bound is not None:
                    bound.__exit__(None, None, None)
            finally:
                if context is not None and self._given_context is None:
                    context.term()

    def _drain(self, sets: list[DestinationSet]) -> None:
        """Drain and close every set, in order, even when one of them raises."""
        if not sets:
            return
        try:
            sets[0].close_all(self._settings.drain_timeout_s)
        finally:
            self._drain(sets[1:])
