"""Tests for LoopResources: a poll loop's context, bound sockets and destination sets, all
cleaned up on leaving its ``with`` (drained, closed, ipc files removed, context termed
only when owned), also when the body raises."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.loop import MAX_CONTEXT_SOCKETS, LoopResources, raise_open_file_limit

#: How long any receive may take before the test fails instead of hanging.
WAIT_MS = 2000


@dataclass(frozen=True)
class Limits:
    """The four limits LoopResources reads, as a router's settings carry them."""

    hwm: int = 1000
    allow_remote: bool = False
    backlog_limit: int = 10
    drain_timeout_s: float = 0.2


@pytest.fixture
def counters() -> Counters:
    """Fresh counters per test."""
    return Counters()


def message(index: int) -> list[bytes]:
    """A two-frame message numbered ``index``."""
    return [b"header", str(index).encode()]


class Boom(Exception):
    """Raised by a test body, to see it leave the with block."""


class TestLoopResources:
    def test_bound_sockets_are_closed_and_ipc_files_removed(
        self, counters: Counters, run_dir: Path
    ) -> None:
        """Every socket bound through it is closed on exit and its ipc file is gone."""
        paths = [run_dir / "inbound", run_dir / "control"]
        with LoopResources(Limits(), counters) as resources:
            pull = resources.bind(zmq.PULL, f"ipc://{paths[0]}")
            router = resources.bind(zmq.ROUTER, f"ipc://{paths[1]}")
            assert all(path.exists() for path in paths)
        assert pull.closed and router.closed
        assert not any(path.exists() for path in paths)

    def test_destinations_are_drained_on_exit(self, counters: Counters, run_dir: Path) -> None:
        """A backlog queued while the peer was away reaches it on exit, in order."""
        endpoint = f"ipc://{run_dir}/sink"
        limits = Limits(hwm=1, drain_timeout_s=10.0)
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        peer = context.socket(zmq.PULL)
        peer.setsockopt(zmq.LINGER, 0)
        try:
            with LoopResources(limits, counters, context) as resources:
                destinations = resources.destinations()
                for index in range(4):
                    assert destinations.send(endpoint, message(index))
                assert [dest.name for dest in resources.backlogged()] == [endpoint]
                peer.bind(endpoint)
                started = time.monotonic()
            assert time.monotonic() - started < 5.0, "exit waited for the whole drain timeout"
            received = []
            for _ in range(4):
                assert peer.poll(WAIT_MS), "a drained message did not arrive"
                received.append(peer.recv_multipart())
            assert received == [message(index) for index in range(4)]
            assert counters.total("dropped") == 0
        finally:
            peer.close(linger=0)
            context.destroy(linger=0)

    def test_an_undrainable_backlog_is_dropped_within_the_drain_timeout(
        self, counters: Counters, run_dir: Path
    ) -> None:
        """With no peer, exit waits the drain timeout (per set), then counts the backlog."""
        limits = Limits(hwm=1, drain_timeout_s=0.2)
        with LoopResources(limits, counters) as resources:
            first, second = resources.destinations(), resources.destinations()
            for index in range(3):
                first.send(f"ipc://{run_dir}/gone-a", message(index))
                second.send(f"ipc://{run_dir}/gone-b", message(index))
            assert len(resources.backlogged()) == 2
            started = time.monotonic()
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 3.0
        assert counters.get("dropped", "closed") == 6
        assert len(first) == len(second) == 0

    def test_an_owned_context_is_termed(self, counters: Counters) -> None:
        """Without a context given, it makes one and terms it on exit."""
        with LoopResources(Limits(), counters) as resources:
            context = resources.context
            assert not context.closed
        assert context.closed

    def test_a_given_context_is_left_open(
        self, counters: Counters, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path
    ) -> None:
        """A context passed in is used, and not termed on exit."""
        with LoopResources(Limits(), counters, context) as resources:
            assert resources.context is context
            sock = resources.bind(zmq.PULL, f"ipc://{run_dir}/inbound")
        assert sock.closed
        assert not context.closed

    def test_an_exception_propagates_and_everything_is_cleaned_up(
        self, counters: Counters, run_dir: Path
    ) -> None:
        """A body that raises still leaves sockets closed, backlogs counted, context termed."""
        path = run_dir / "inbound"
        with pytest.raises(Boom), LoopResources(Limits(), counters) as resources:
            context = resources.context
            sock = resources.bind(zmq.PULL, f"ipc://{path}")
            resources.destinations().send(f"ipc://{run_dir}/gone", message(0))
            raise Boom
        assert sock.closed and not path.exists()
        assert counters.get("dropped", "closed") == 1
        assert context.closed

    def test_use_outside_the_with_block_is_refused(self, counters: Counters) -> None:
        """bind, destinations and context need the with block; entering twice is refused."""
        resources = LoopResources(Limits(), counters)
        with pytest.raises(RuntimeError):
            resources.bind(zmq.PULL, "inproc://nowhere")
        with pytest.raises(RuntimeError):
            resources.destinations()
        with resources, pytest.raises(RuntimeError, match="already in use"):
            resources.__enter__()
        with pytest.raises(RuntimeError):
            _ = resources.context


class TestSocketLimits:
    def test_an_owned_context_holds_thousands_of_destinations(self, counters: Counters) -> None:
        """A context it makes takes more than libzmq's default 1023 sockets (a router
        was capped near a thousand workers), and the open-file limit allows them."""
        with LoopResources(Limits(), counters) as resources:
            assert resources.context.get(zmq.MAX_SOCKETS) == MAX_CONTEXT_SOCKETS
            destinations = resources.destinations()
            for index in range(1100):
                destinations.get(f"inproc://peer-{index}").socket  # noqa: B018  (connects)
            assert len(destinations) == 1100

    def test_the_open_file_limit_is_raised_never_lowered(self) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            assert raise_open_file_limit(1) == soft  # never lowered
            if hard == resource.RLIM_INFINITY or hard > 64:
                resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
                assert raise_open_file_limit(128) == 128
                assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 128
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
