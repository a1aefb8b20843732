"""Tests for PollLoop: readable handlers, gates, backlog flushing, ticks and stopping.

Each test drives the loop from ``on_tick``, which runs every iteration in the loop's own
thread, so the test script and the loop never race.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.destinations import Destination, DestinationSet
from router_core.loop import PollLoop

WAIT_MS = 2000
WAIT_S = WAIT_MS / 1000


class Sockets:
    """Sockets owned by one test, closed with linger 0 at teardown."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._sockets: list[zmq.Socket[bytes]] = []

    def make(self, socket_type: int, *, bind: str = "", connect: str = "") -> zmq.Socket[bytes]:
        sock = self._context.socket(socket_type)
        self._sockets.append(sock)
        sock.setsockopt(zmq.LINGER, 0)
        if bind:
            sock.bind(bind)
        if connect:
            sock.connect(connect)
        return sock

    def close(self) -> None:
        for sock in self._sockets:
            sock.close(linger=0)


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    """This test's own context; every socket left on it is closed with linger 0."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
def sockets(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Sockets]:
    """This test's sockets."""
    owned = Sockets(context)
    yield owned
    owned.close()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A short directory for ipc socket files."""
    path = Path(tempfile.mkdtemp(prefix="sb-loop-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def nothing_backlogged() -> list[Destination]:
    return []


def run_script(
    loop: PollLoop,
    step: Callable[[int], bool],
    backlogged: Callable[[], list[Destination]] = nothing_backlogged,
) -> None:
    """Run ``loop`` calling ``step(iteration)`` each tick until it returns True.

    Ticks are requested immediately (poll timeout 0), and the run fails rather than
    hangs if the script has not finished within the wait limit.
    """
    deadline = time.monotonic() + WAIT_S
    iteration = 0
    failure: list[str] = []

    def on_tick(now: float) -> float:
        nonlocal iteration
        iteration += 1
        if step(iteration):
            loop.request_stop()
        elif now > deadline:
            failure.append(f"script unfinished after {iteration} iterations")
            loop.request_stop()
        return now

    loop.run(backlogged, on_tick)
    if failure:
        pytest.fail(failure[0])


class TestPollLoop:
    """PollLoop.run: handlers, gates, flushing and stopping."""

    def test_calls_handler_when_readable(self, sockets: Sockets) -> None:
        """on_readable runs for a socket with input, and only then."""
        pull = sockets.make(zmq.PULL, bind="inproc://in")
        idle = sockets.make(zmq.PULL, bind="inproc://idle")
        push = sockets.make(zmq.PUSH, connect="inproc://in")
        received: list[bytes] = []
        idle_calls: list[int] = []
        loop = PollLoop()
        loop.watch(pull, lambda: received.append(pull.recv()))
        loop.watch(idle, lambda: idle_calls.append(1))
        push.send(b"one")
        run_script(loop, lambda _: received == [b"one"])
        assert idle_calls == []

    def test_gate_closes_and_reopens_reading(self, sockets: Sockets) -> None:
        """While the gate is false input stays queued; once true, the handler reads it."""
        pull = sockets.make(zmq.PULL, bind="inproc://gated")
        push = sockets.make(zmq.PUSH, connect="inproc://gated")
        gate_open = False
        received: list[bytes] = []
        closed_iterations = 20
        loop = PollLoop()
        loop.watch(pull, lambda: received.append(pull.recv()), gate=lambda: gate_open)
        push.send(b"waiting")
        assert pull.poll(WAIT_MS, zmq.POLLIN), "input never arrived"

        def step(iteration: int) -> bool:
            nonlocal gate_open
            if iteration <= closed_iterations:
                # The input is there all along, yet the closed gate keeps the handler away.
                assert received == []
                assert pull.poll(0, zmq.POLLIN)
            if iteration == closed_iterations:
                gate_open = True
            return received == [b"waiting"]

        run_script(loop, step)

    def test_gate_closes_again(self, sockets: Sockets) -> None:
        """A gate that closes after a read stops further reads until it opens again."""
        pull = sockets.make(zmq.PULL, bind="inproc://regated")
        push = sockets.make(zmq.PUSH, connect="inproc://regated")
        received: list[bytes] = []
        loop = PollLoop()
        # Open only while nothing has been read, or once the test reopens it.
        reopened = False
        loop.watch(
            pull,
            lambda: received.append(pull.recv()),
            gate=lambda: reopened or not received,
        )
        push.send(b"first")
        push.send(b"second")
        assert pull.poll(WAIT_MS, zmq.POLLIN)
        after_first = 0

        def step(iteration: int) -> bool:
            nonlocal reopened, after_first
            if received and not reopened:
                after_first += 1
                # The handler reads one message per call; the second stays unread.
                assert received == [b"first"]
                if after_first == 20:
                    reopened = True
            return received == [b"first", b"second"]

        run_script(loop, step)
        assert after_first == 20

    def test_flushes_backlogged_destinations(
        self, context: zmq.Context[zmq.Socket[bytes]], sockets: Sockets, run_dir: Path
    ) -> None:
        """A destination with a backlog is flushed once its peer can take messages."""
        endpoint = f"ipc://{run_dir}/peer"
        counters = Counters()
        dests = DestinationSet(context, counters, backlog_limit=10)
        try:
            for i in range(3):
                dests.send(endpoint, [str(i).encode()])
            assert dests.backlog_sizes() == {endpoint: 3}
            sink = sockets.make(zmq.PULL, bind=endpoint)
            loop = PollLoop()
            run_script(loop, lambda _: not dests.backlogged(), backlogged=dests.backlogged)
            received = []
            for _ in range(3):
                assert sink.poll(WAIT_MS, zmq.POLLIN)
                received.append(sink.recv())
            assert received == [b"0", b"1", b"2"]
        finally:
            dests.close_all(0.0)

    def test_tick_deadline_sets_poll_timeout(self) -> None:
        """on_tick's returned deadline wakes the loop then, well before the 100 ms cap."""
        loop = PollLoop()
        ticks: list[float] = []

        def on_tick(now: float) -> float:
            ticks.append(now)
            if len(ticks) == 5:
                loop.request_stop()
            return now + 0.005

        started = time.monotonic()
        loop.run(nothing_backlogged, on_tick)
        assert len(ticks) == 5
        assert time.monotonic() - started < 0.4

    def test_stop_before_run_returns_at_once(self) -> None:
        """A loop asked to stop before it runs returns without a tick."""
        loop = PollLoop()
        loop.request_stop()
        assert loop.stopping
        ticks: list[float] = []
        loop.run(nothing_backlogged, ticks.append)  # type: ignore[arg-type]
        assert ticks == []

    def test_request_stop_from_another_thread(self, sockets: Sockets) -> None:
        """request_stop() from another thread makes a waiting run() return promptly."""
        pull = sockets.make(zmq.PULL, bind="inproc://quiet")
        loop = PollLoop()
        loop.watch(pull, lambda: None)
        ticked = threading.Event()

        def on_tick(now: float) -> None:
            ticked.set()

        runner = threading.Thread(target=loop.run, args=(nothing_backlogged, on_tick))
        runner.start()
        try:
            assert ticked.wait(WAIT_S), "the loop never ticked"
            assert not loop.stopping
            loop.request_stop()
            runner.join(WAIT_S)
            assert not runner.is_alive(), "run() did not return after request_stop()"
        finally:
            loop.request_stop()
            runner.join(WAIT_S)
