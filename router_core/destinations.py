"""Per-destination PUSH sockets with bounded backlogs: the successor of ``SocketMapping``.

A destination's socket is connected on first use. A send never blocks: if ZeroMQ's own
queue (the high-water mark) is full, the message waits in the destination's backlog,
which the loop flushes when the socket turns writable; if the backlog is full too, the
message is dropped and counted. So a dead or stalled peer costs at most HWM + backlog
messages of memory and never delays any other destination.

A set whose peers come and go (the detokenizer's workers) bounds the sockets too:
:meth:`DestinationSet.close_idle` closes (linger 0) and forgets destinations nothing was
offered to for a while, and ``max_destinations`` caps how many exist, closing the longest
idle first. What was still queued is dropped with a reason (``destination_idle``,
``destination_cap``) and each close counted (``destinations_closed``). To keep the send
path a store, a send only marks its destination; the idle clock reads the marks when it
runs (:meth:`DestinationSet.observe`), so "idle since" is accurate to one sweep. The
choices themselves are pure: :func:`idle_names` and :func:`over_cap`.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

import zmq

from router_core.counters import Counters
from router_core.transport import DEFAULT_BACKLOG, DEFAULT_HWM, FrameLike, connect, send_frames

__all__ = ["MAX_LINGERING_ONCE", "Destination", "DestinationSet", "idle_names", "over_cap"]

#: Sockets :meth:`DestinationSet.send_once` may have lingering at a time; beyond, the
#: message is dropped (``dropped{once_limit}``), so a flood of messages from unknown peers
#: cannot take every file descriptor.
MAX_LINGERING_ONCE: Final = 256


class Destination:
    """One peer: a lazily connected PUSH socket and a bounded backlog of messages."""

    def __init__(
        self,
        name: str,
        endpoint: str,
        context: zmq.Context[zmq.Socket[bytes]],
        *,
        hwm: int,
        backlog_limit: int,
        counters: Counters,
        waiting: dict[str, Destination] | None = None,
    ) -> None:
        self.name = name
        #: The set's index of destinations with a backlog (None: not in a set): this one
        #: is in it exactly while its backlog is not empty, so finding the backlogged
        #: ones costs what they are, not what every destination is.
        self._waiting = waiting
        self.endpoint = endpoint
        self._context = context
        self._hwm = hwm
        self._counters = counters
        self.backlog: deque[Sequence[FrameLike]] = deque()
        self.backlog_limit = backlog_limit
        self._socket: zmq.Socket[bytes] | None = None
        #: Set by every :meth:`send`; read and cleared by :meth:`DestinationSet.observe`.
        self.offered = False
        #: When the idle clock last saw a send offered here (monotonic seconds).
        self.last_active = time.monotonic()

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The PUSH socket, connected on first use."""
        if self._socket is None:
            self._socket = connect(self._context, zmq.PUSH, self.endpoint, hwm=self._hwm)
        return self._socket

    @property
    def is_connected(self) -> bool:
        """Whether the socket has been created yet."""
        return self._socket is not None

    def send(self, frames: Sequence[FrameLike]) -> bool:
        """Send or queue one message; False (and counted) if it had to be dropped."""
        self.offered = True
        try:
            sock = self.socket
        except zmq.ZMQError:
            self._counters.add("dropped", "connect_failed")
            return False
        if not self.backlog and send_frames(sock, frames):
            return True
        if len(self.backlog) >= self.backlog_limit:
            self._counters.add("dropped", "backlog_full")
            return False
        self.backlog.append(frames)
        if self._waiting is not None:
            self._waiting[self.name] = self
        return True

    def flush(self) -> int:
        """Send queued messages until the socket pushes back; return how many went."""
        sent = 0
        sock = self.socket
        while self.backlog and send_frames(sock, self.backlog[0]):
            self.backlog.popleft()
            sent += 1
        if not self.backlog and self._waiting is not None:
            self._waiting.pop(self.name, None)
        return sent

    def close(
        self, drain_timeout_s: float = 0.0, *, drop_reason: str = "closed", linger_s: float = 0.0
    ) -> None:
        """Flush what can be flushed within ``drain_timeout_s``, then close.

        Messages still queued after the deadline are dropped with ``drop_reason``; the
        socket lingers for what is left of the deadline, or ``linger_s`` if longer, so
        ZeroMQ can hand its own queue to the peer (libzmq#4660: a PUSH closed right after
        sending can lose its tail). Closing never blocks; the linger runs in ZeroMQ.
        """
        deadline = time.monotonic() + drain_timeout_s
        if self._socket is not None:
            poller = zmq.Poller()
            poller.register(self._socket, zmq.POLLOUT)
            while self.backlog and time.monotonic() < deadline:
                if poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                    self.flush()
        if self.backlog:
            self._counters.add("dropped", drop_reason, len(self.backlog))
            self.backlog.clear()
        if self._waiting is not None and self._waiting.get(self.name) is self:
            del self._waiting[self.name]
        if self._socket is not None:
            linger_ms = max(0, int(max(deadline - time.monotonic(), linger_s) * 1000))
            self._socket.close(linger=linger_ms)
            self._socket = None


def idle_names(
    last_active: Mapping[str, float], now: float, idle_s: float, busy: Callable[[str], bool]
) -> list[str]:
    """The names last active ``idle_s`` or more before ``now`` for which ``busy`` is
    false, the longest idle first."""
    cutoff = now - idle_s
    idle = [name for name, at in last_active.items() if at <= cutoff and not busy(name)]
    return sorted(idle, key=last_active.__getitem__)


def over_cap(last_active: Mapping[str, float], cap: int) -> list[str]:
    """The names to close so that at most ``cap`` remain: the longest idle first (ties in
    the mapping's order, the oldest made first)."""
    excess = len(last_active) - cap
    if excess <= 0:
        return []
    return sorted(last_active, key=last_active.__getitem__)[:excess]


class DestinationSet:
    """Destinations keyed by name, created on first send and closed on demand.

    With ``max_destinations`` set, making one more than that many first closes the
    longest idle (counted ``destinations_closed{cap}``, its queue ``dropped{destination_cap}``).
    """

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        counters: Counters,
        *,
        hwm: int = DEFAULT_HWM,
        backlog_limit: int = DEFAULT_BACKLOG,
        max_destinations: int | None = None,
        max_lingering_once: int = MAX_LINGERING_ONCE,
    ) -> None:
        if max_destinations is not None and max_destinations <= 0:
            raise ValueError(f"max_destinations must be positive, not {max_destinations}")
        if max_lingering_once <= 0:
            raise ValueError(f"max_lingering_once must be positive, not {max_lingering_once}")
        self._context = context
        self._counters = counters
        self._hwm = hwm
        self._backlog_limit = backlog_limit
        #: At most this many destinations exist at once (None: no cap).
        self.max_destinations = max_destinations
        self._by_name: dict[str, Destination] = {}
        #: The destinations whose backlog is not empty, kept by the destinations.
        self._waiting: dict[str, Destination] = {}
        self._max_lingering_once = max_lingering_once
        #: When each socket send_once closed stops lingering at the latest (a heap).
        self._lingering_until: list[float] = []

    def get(self, name: str, endpoint: str | None = None) -> Destination:
        """The destination called ``name``, created for ``endpoint`` (default: the name)."""
        dest = self._by_name.get(name)
        if dest is None:
            cap = self.max_destinations
            if cap is not None and len(self._by_name) >= cap:
                self._close_over(cap - 1, time.monotonic())
            dest = Destination(
                name,
                endpoint or name,
                self._context,
                hwm=self._hwm,
                backlog_limit=self._backlog_limit,
                counters=self._counters,
                waiting=self._waiting,
            )
            self._by_name[name] = dest
        return dest

    def send(self, name: str, frames: Sequence[FrameLike]) -> bool:
        """Send to the destination called ``name`` (its endpoint is the name)."""
        return self.get(name).send(frames)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Destination]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def backlogged(self) -> list[Destination]:
        """Destinations with queued messages, to poll for POLLOUT.

        The loop asks every iteration, so this reads the index the destinations keep
        (:attr:`_waiting`) instead of looking at every destination: with thousands of
        workers registered and a few backlogged, it costs the few."""
        return [dest for dest in self._waiting.values() if dest.backlog]

    def backlog_sizes(self) -> dict[str, int]:
        """Queued messages per destination name."""
        return {name: len(dest.backlog) for name, dest in self._by_name.items()}

    def send_once(self, endpoint: str, frames: Sequence[FrameLike], linger_s: float = 1.0) -> None:
        """Send one message to a peer we keep no socket for (e.g. "register again").

        The socket queues the message until the connection is up (no ZMQ_IMMEDIATE) and
        is closed at once; ZeroMQ delivers within ``linger_s`` or drops it. While
        ``max_lingering_once`` such sockets may still linger, the message is dropped
        instead (``dropped{once_limit}``).
        """
        now = time.monotonic()
        lingering = self._lingering_until
        while lingering and lingering[0] <= now:
            heapq.heappop(lingering)
        if len(lingering) >= self._max_lingering_once:
            self._counters.add("dropped", "once_limit")
            return
        try:
            sock = connect(self._context, zmq.PUSH, endpoint, hwm=1, immediate=False)
        except zmq.ZMQError:
            self._counters.add("dropped", "connect_failed")
            return
        try:
            if not send_frames(sock, frames):
                self._counters.add("dropped", "backlog_full")
        finally:
            sock.close(linger=int(linger_s * 1000))
            heapq.heappush(lingering, now + linger_s)

    def discard(self, name: str, drop_reason: str, *, linger_s: float = 0.0) -> None:
        """Close and forget ``name`` now, counting anything queued as ``drop_reason``.

        ``linger_s`` gives what was already handed to ZeroMQ that long to leave.
        """
        dest = self._by_name.pop(name, None)
        if dest is not None:
            dest.close(0.0, drop_reason=drop_reason, linger_s=linger_s)

    def observe(self, now: float) -> dict[str, float]:
        """Move the idle clock to ``now``: each destination offered a send since the last
        call was active at ``now``. Returns when each was last active."""
        clocks = {}
        for name, dest in self._by_name.items():
            if dest.offered:
                dest.offered = False
                dest.last_active = now
            clocks[name] = dest.last_active
        return clocks

    def close_idle(self, now: float, idle_s: float, busy: Callable[[str], bool]) -> list[str]:
        """Close (linger 0) and forget every destination offered nothing for ``idle_s``
        (as :meth:`observe` saw it) unless ``busy(name)``; the names closed, longest idle
        first. Each counts as ``destinations_closed{idle}``, its queue as
        ``dropped{destination_idle}``."""
        closed = idle_names(self.observe(now), now, idle_s, busy)
        for name in closed:
            self._close(name, "idle", "destination_idle")
        return closed

    def _close_over(self, cap: int, now: float) -> None:
        for name in over_cap(self.observe(now), cap):
            self._close(name, "cap", "destination_cap")

    def _close(self, name: str, why: str, drop_reason: str) -> None:
        self.discard(name, drop_reason)
        self._counters.add("destinations_closed", why)

    def close_all(self, drain_timeout_s: float) -> None:
        """Drain every destination (sharing one deadline), then close them all."""
        deadline = time.monotonic() + drain_timeout_s
        for dest in list(self._by_name.values()):
            dest.close(max(0.0, deadline - time.monotonic()))
        self._by_name.clear()
