"""What every routing loop shares: a stop flag, polling inbound sockets and flushing
backlogged destinations, with timers, in one thread that always reaches its ``finally``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import zmq

from router_core.destinations import Destination

__all__ = ["PollLoop"]

#: The longest a loop sleeps in poll, so a stop request is seen promptly.
MAX_POLL_MS = 100


class PollLoop:
    """Polls ``inbound`` for input and backlogged destinations for room to send."""

    def __init__(self) -> None:
        self._stop = threading.Event()
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

    def _apply_gates(self) -> None:
        for sock, (gate, is_open) in self._gates.items():
            wanted = gate()
            if wanted != is_open[0]:
                self._poller.register(sock, zmq.POLLIN if wanted else 0)
                is_open[0] = wanted

    def request_stop(self) -> None:
        """Ask the loop to return after its current iteration (any thread, signal-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop has been requested."""
        return self._stop.is_set()

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
        while not self._stop.is_set():
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
            for sock, handler in self._handlers.items():
                if ready.get(sock, 0) & zmq.POLLIN:
                    handler()
            next_tick = on_tick(time.monotonic())
