"""Tests for destinations: lazy PUSH sockets with bounded backlogs that never block the caller."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.destinations import DestinationSet
from tests.support.eventually import wait_until

#: How long any receive or readiness wait may take before the test fails instead of hanging.
WAIT_MS = 2000


@pytest.fixture
def counters() -> Counters:
    """Fresh counters per test."""
    return Counters()


class Pulls:
    """Bound PULL sockets owned by one test, closed (linger 0) at teardown."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._sockets: list[zmq.Socket[bytes]] = []

    def bind(self, endpoint: str, hwm: int = 1000) -> zmq.Socket[bytes]:
        """A PULL bound to ``endpoint`` with receive high-water mark ``hwm``."""
        sock = self._context.socket(zmq.PULL)
        self._sockets.append(sock)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, hwm)
        sock.bind(endpoint)
        return sock

    def close(self) -> None:
        for sock in self._sockets:
            sock.close(linger=0)


@pytest.fixture
def pulls(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Pulls]:
    """This test's PULL sockets."""
    owned = Pulls(context)
    yield owned
    owned.close()


class DestinationSets:
    """Destination sets owned by one test, closed at teardown even if the test fails."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], counters: Counters) -> None:
        self._context = context
        self._counters = counters
        self._sets: list[DestinationSet] = []

    def make(self, *, hwm: int = 1000, backlog_limit: int = 1000) -> DestinationSet:
        """A destination set sharing the test's counters."""
        dests = DestinationSet(self._context, self._counters, hwm=hwm, backlog_limit=backlog_limit)
        self._sets.append(dests)
        return dests

    def close(self) -> None:
        for dests in self._sets:
            for dest in dests:
                dest.close(0.0)


@pytest.fixture
def sets(context: zmq.Context[zmq.Socket[bytes]], counters: Counters) -> Iterator[DestinationSets]:
    """This test's destination sets."""
    owned = DestinationSets(context, counters)
    yield owned
    owned.close()


def receive(sock: zmq.Socket[bytes], timeout_ms: int = WAIT_MS) -> list[bytes]:
    """One message, or fail after ``timeout_ms``."""
    if not sock.poll(timeout_ms, zmq.POLLIN):
        pytest.fail(f"no message within {timeout_ms} ms")
    return sock.recv_multipart()


def receive_ready(sock: zmq.Socket[bytes]) -> list[list[bytes]]:
    """Every message already waiting, without blocking."""
    ready = []
    while sock.poll(0, zmq.POLLIN):
        ready.append(sock.recv_multipart())
    return ready


def message(index: int) -> list[bytes]:
    """A two-frame message numbered ``index``."""
    return [b"header", str(index).encode()]


class TestDestination:
    """Destination: lazy connection, bounded backlog, ordered flush, draining close."""

    def test_connects_lazily(self, sets: DestinationSets, pulls: Pulls, counters: Counters) -> None:
        """get() creates no socket; the first send does."""
        dests = sets.make()
        dest = dests.get("inproc://lazy")
        assert not dest.is_connected
        assert "inproc://lazy" in dests and len(dests) == 1
        assert dests.get("inproc://lazy") is dest
        sink = pulls.bind("inproc://lazy")
        assert dests.send("inproc://lazy", message(0))
        assert dest.is_connected
        assert receive(sink) == message(0)
        dests.close_all(0.0)

    def test_absent_peer_queues_then_drops(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """With nobody bound, sends queue up to backlog_limit, then drop and count backlog_full."""
        endpoint = f"ipc://{run_dir}/absent"
        dests = sets.make(hwm=1, backlog_limit=3)
        results = [dests.send(endpoint, message(i)) for i in range(5)]
        assert results == [True, True, True, False, False]
        assert counters.get("dropped", "backlog_full") == 2
        assert dests.backlog_sizes() == {endpoint: 3}
        assert [d.name for d in dests.backlogged()] == [endpoint]
        dests.close_all(0.0)

    def test_flush_delivers_backlog_in_order(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """Once a PULL binds, flush() sends the backlog in order; later sends queue behind it."""
        endpoint = f"ipc://{run_dir}/late"
        dests = sets.make(backlog_limit=10)
        dest = dests.get(endpoint)
        for i in range(3):
            assert dest.send(message(i))
        assert len(dest.backlog) == 3
        sink = pulls.bind(endpoint)
        assert dest.socket.poll(WAIT_MS, zmq.POLLOUT), "peer never became writable"
        # The socket is writable now, but a new message must not overtake the backlog.
        assert dest.send(message(3))
        assert len(dest.backlog) == 4

        def flushed() -> bool:
            dest.flush()
            if dest.backlog:
                dest.socket.poll(100, zmq.POLLOUT)
            return not dest.backlog

        wait_until(flushed, WAIT_MS / 1000, lambda: f"an empty backlog ({len(dest.backlog)} left)")
        assert dest.send(message(4))
        assert [receive(sink) for _ in range(5)] == [message(i) for i in range(5)]
        assert counters.total("dropped") == 0
        dests.close_all(0.0)

    def test_backlogged_follows_each_backlog(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """backlogged() names exactly the destinations with a backlog, whichever way it
        fills and empties: queued, flushed, closed or discarded (the set keeps an index
        of them, so the loop's every-iteration question costs the few, not every one)."""
        dests = sets.make(backlog_limit=10)
        late, gone, never = (f"ipc://{run_dir}/{name}" for name in ("late", "gone", "never"))
        assert dests.send(late, message(0)) and dests.send(gone, message(0))
        dests.get(never)  # made, sent nothing: no backlog
        assert sorted(d.name for d in dests.backlogged()) == sorted([late, gone])
        dests.discard(gone, "deregistered")
        assert [d.name for d in dests.backlogged()] == [late]
        pulls.bind(late)
        dest = dests.get(late)

        def flushed() -> bool:
            dest.flush()
            if dest.backlog:
                dest.socket.poll(100, zmq.POLLOUT)
            return not dest.backlog

        wait_until(flushed, WAIT_MS / 1000, lambda: f"an empty backlog ({len(dest.backlog)} left)")
        assert dests.backlogged() == []
        assert dests.send(gone, message(1))  # a new destination under the discarded name
        assert [d.name for d in dests.backlogged()] == [gone]
        dests.close_all(0.0)
        assert dests.backlogged() == []
        assert counters.get("dropped", "deregistered") == 1

    def test_flush_with_empty_backlog_sends_nothing(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters
    ) -> None:
        """flush() of an empty backlog returns 0."""
        dests = sets.make()
        assert dests.get("inproc://idle").flush() == 0
        dests.close_all(0.0)

    @pytest.mark.timeout(20)
    def test_stalled_destination_never_blocks_another(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters
    ) -> None:
        """A peer that never reads fills its HWM and backlog, then drops; the other gets all."""
        pulls.bind("inproc://stalled", hwm=1)
        healthy_sink = pulls.bind("inproc://healthy", hwm=1)
        dests = sets.make(hwm=1, backlog_limit=5)
        healthy = dests.get("inproc://healthy")
        burst = 300
        accepted = 0
        received: list[list[bytes]] = []
        started = time.monotonic()
        for i in range(burst):
            accepted += dests.send("inproc://stalled", message(i))
            assert dests.send("inproc://healthy", message(i))
            # What the poll loop does: read the peer's side, flush on POLLOUT.
            while healthy.backlog:
                received.extend(receive_ready(healthy_sink))
                if healthy.socket.poll(WAIT_MS, zmq.POLLOUT):
                    healthy.flush()
        while len(received) < burst:
            received.append(receive(healthy_sink))
        elapsed = time.monotonic() - started
        assert received == [message(i) for i in range(burst)]
        assert elapsed < 5.0, f"sends blocked: {elapsed:.2f}s for {burst} messages"
        dropped = counters.get("dropped", "backlog_full")
        assert dropped > 0
        assert accepted + dropped == burst
        assert dests.backlog_sizes() == {"inproc://stalled": 5, "inproc://healthy": 0}

    def test_close_counts_what_cannot_drain(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """close() waits at most its drain timeout, then counts the backlog as dropped."""
        dests = sets.make(backlog_limit=10)
        dest = dests.get(f"ipc://{run_dir}/gone")
        for i in range(4):
            dest.send(message(i))
        started = time.monotonic()
        dest.close(0.2, drop_reason="shutdown")
        elapsed = time.monotonic() - started
        assert 0.15 <= elapsed < 2.0
        assert counters.get("dropped", "shutdown") == 4
        assert not dest.backlog
        assert not dest.is_connected

    def test_close_drains_to_a_peer_that_appears(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """close() flushes the backlog to a peer that binds in time and returns once it has."""
        endpoint = f"ipc://{run_dir}/drain"
        dests = sets.make(backlog_limit=10)
        dest = dests.get(endpoint)
        for i in range(4):
            dest.send(message(i))
        sink = pulls.bind(endpoint)
        started = time.monotonic()
        dest.close(10.0)
        assert time.monotonic() - started < 5.0, "close waited for the whole drain timeout"
        assert counters.total("dropped") == 0
        assert [receive(sink) for _ in range(4)] == [message(i) for i in range(4)]

    def test_unconnectable_endpoint_is_dropped_and_counted(
        self, sets: DestinationSets, counters: Counters
    ) -> None:
        """A destination whose endpoint zmq cannot connect drops the message as connect_failed."""
        dests = sets.make()
        assert dests.send("bogus://nowhere", message(0)) is False
        assert counters.get("dropped", "connect_failed") == 1
        assert not dests.get("bogus://nowhere").is_connected


class TestDestinationSet:
    """DestinationSet: destinations by name, one-off sends, discard and close_all."""

    def test_endpoint_defaults_to_name(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters
    ) -> None:
        """A destination's endpoint is its name unless given."""
        dests = sets.make()
        assert dests.get("inproc://a").endpoint == "inproc://a"
        assert dests.get("engine", "inproc://engine").endpoint == "inproc://engine"

    def test_discard_counts_with_reason(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """discard() forgets a destination now, counting its backlog under the given reason."""
        endpoint = f"ipc://{run_dir}/dead"
        dests = sets.make(backlog_limit=10)
        dests.send(endpoint, message(0))
        dests.send(endpoint, message(1))
        dests.discard(endpoint, "dead_worker")
        assert counters.get("dropped", "dead_worker") == 2
        assert endpoint not in dests
        dests.discard("never-seen", "dead_worker")
        assert counters.total("dropped") == 2

    def test_discard_lingers_for_queued_messages(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters
    ) -> None:
        """With linger_s, messages already handed to ZeroMQ still reach the peer."""
        sink = pulls.bind("inproc://linger")
        dests = sets.make()
        for i in range(3):
            assert dests.send("inproc://linger", message(i))
        dests.discard("inproc://linger", "replaced", linger_s=2.0)
        assert [receive(sink) for _ in range(3)] == [message(i) for i in range(3)]
        assert counters.total("dropped") == 0

    def test_send_once_reaches_a_bound_peer(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters
    ) -> None:
        """send_once() delivers one message without keeping a destination."""
        sink = pulls.bind("inproc://once")
        dests = sets.make()
        dests.send_once("inproc://once", message(7))
        assert receive(sink) == message(7)
        assert "inproc://once" not in dests
        assert counters.total("dropped") == 0

    def test_send_once_waits_for_a_late_peer(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """send_once() queues until the connection is up, within its linger."""
        endpoint = f"ipc://{run_dir}/late-once"
        dests = sets.make()
        dests.send_once(endpoint, message(1), linger_s=WAIT_MS / 1000)
        sink = pulls.bind(endpoint)
        assert receive(sink) == message(1)

    def test_send_once_counts_connect_failure(
        self, sets: DestinationSets, counters: Counters
    ) -> None:
        """send_once() to an endpoint zmq cannot connect counts connect_failed."""
        sets.make().send_once("bogus://nowhere", message(0))
        assert counters.get("dropped", "connect_failed") == 1

    def test_backlog_sizes_and_close_all(
        self, sets: DestinationSets, pulls: Pulls, counters: Counters, run_dir: Path
    ) -> None:
        """backlog_sizes() lists every destination; close_all() drops leftovers as ``closed``."""
        dests = sets.make(backlog_limit=10)
        first, second = f"ipc://{run_dir}/one", f"ipc://{run_dir}/two"
        dests.send(first, message(0))
        for i in range(3):
            dests.send(second, message(i))
        assert dests.backlog_sizes() == {first: 1, second: 3}
        assert {d.name for d in dests} == {first, second}
        dests.close_all(0.0)
        assert counters.get("dropped", "closed") == 4
        assert len(dests) == 0
