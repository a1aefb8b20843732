"""Bounded destination sets: idle destinations closed and forgotten, a hard cap on how many
exist, the longest idle closed first; the choices as pure functions, then on real sockets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.destinations import DestinationSet, idle_names, over_cap
from tests.support.eventually import wait_until
from tests.support.zmq_context import open_sockets


def nobody(name: str) -> bool:
    """No destination is busy."""
    return False


class TestIdleNames:
    """idle_names: who has been idle long enough and is not busy, longest idle first."""

    def test_only_those_idle_for_the_whole_bound(self) -> None:
        """A name last active exactly idle_s ago is idle; one a moment later is not."""
        clocks = {"a": 10.0, "b": 10.5, "c": 20.0}
        assert idle_names(clocks, 20.0, 10.0, nobody) == ["a"]
        assert idle_names(clocks, 20.5, 10.0, nobody) == ["a", "b"]

    def test_longest_idle_first(self) -> None:
        """The result is ordered by last activity, not by the mapping's order."""
        clocks = {"late": 5.0, "early": 1.0, "middle": 3.0}
        assert idle_names(clocks, 100.0, 1.0, nobody) == ["early", "middle", "late"]

    def test_busy_names_are_kept(self) -> None:
        """A busy name is never chosen, however long idle."""
        clocks = {"open": 0.0, "done": 0.0}
        assert idle_names(clocks, 100.0, 1.0, lambda name: name == "open") == ["done"]

    def test_nothing_to_close(self) -> None:
        """An empty mapping and a recent one both give nothing."""
        assert idle_names({}, 100.0, 1.0, nobody) == []
        assert idle_names({"a": 99.5}, 100.0, 1.0, nobody) == []


class TestOverCap:
    """over_cap: what to close so that the cap holds, longest idle first."""

    def test_under_or_at_the_cap(self) -> None:
        """Nothing to close while at most cap names exist."""
        assert over_cap({"a": 1.0, "b": 2.0}, 2) == []
        assert over_cap({}, 1) == []

    def test_the_longest_idle_beyond_the_cap(self) -> None:
        """Exactly the excess, the least recently active first."""
        clocks = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 4.0}
        assert over_cap(clocks, 2) == ["b", "c"]
        assert over_cap(clocks, 0) == ["b", "c", "a", "d"]

    def test_ties_in_the_mapping_order(self) -> None:
        """Equal clocks: the one made first goes first."""
        assert over_cap({"first": 1.0, "second": 1.0, "third": 1.0}, 1) == ["first", "second"]


@pytest.fixture
def counters() -> Counters:
    """Fresh counters per test."""
    return Counters()


@pytest.fixture
def destinations(
    context: zmq.Context[zmq.Socket[bytes]], counters: Counters
) -> Iterator[DestinationSet]:
    """A destination set with small queues, closed at teardown."""
    made = DestinationSet(context, counters, hwm=1, backlog_limit=4)
    yield made
    made.close_all(0.0)


def endpoint(run_dir: Path, name: str) -> str:
    """An ipc endpoint nobody binds (a worker that went away)."""
    return f"ipc://{run_dir}/{name}"


class TestCloseIdle:
    """DestinationSet.close_idle on real sockets."""

    def test_an_idle_destination_is_closed_and_forgotten(
        self, destinations: DestinationSet, counters: Counters, run_dir: Path
    ) -> None:
        """Sent nothing for idle_s: its socket closes, it is forgotten, its queue is
        dropped as destination_idle and the close counted."""
        gone = endpoint(run_dir, "gone")
        for index in range(6):
            destinations.send(gone, [b"row", str(index).encode()])
        dest = destinations.get(gone)
        assert dest.is_connected and len(dest.backlog) == 4
        assert destinations.close_idle(0.0, 10.0, nobody) == []  # the sends mark it active at 0
        assert destinations.close_idle(9.9, 10.0, nobody) == []
        assert destinations.close_idle(10.0, 10.0, nobody) == [gone]
        assert gone not in destinations and len(destinations) == 0
        assert not dest.is_connected and not dest.backlog
        assert counters.get("destinations_closed", "idle") == 1
        assert counters.get("dropped", "destination_idle") == 4
        assert counters.get("dropped", "backlog_full") == 2

    def test_a_send_since_the_last_sweep_keeps_it(
        self, destinations: DestinationSet, counters: Counters, run_dir: Path
    ) -> None:
        """A destination offered a message between two sweeps is active at the later one."""
        name = endpoint(run_dir, "busy")
        destinations.send(name, [b"row"])
        assert destinations.close_idle(0.0, 10.0, nobody) == []
        destinations.send(name, [b"row"])
        assert destinations.close_idle(15.0, 10.0, nobody) == []
        assert destinations.close_idle(24.0, 10.0, nobody) == []
        assert destinations.close_idle(25.0, 10.0, nobody) == [name]

    def test_a_busy_destination_is_kept(
        self, destinations: DestinationSet, counters: Counters, run_dir: Path
    ) -> None:
        """busy(name) true keeps it open however long idle; false closes it."""
        name = endpoint(run_dir, "open")
        destinations.send(name, [b"row"])
        destinations.observe(0.0)
        assert destinations.close_idle(100.0, 1.0, lambda candidate: candidate == name) == []
        assert name in destinations and destinations.get(name).is_connected
        assert destinations.close_idle(100.0, 1.0, nobody) == [name]
        assert counters.get("destinations_closed", "idle") == 1

    def test_the_next_send_makes_it_again(
        self, destinations: DestinationSet, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """A peer that comes back after its destination was closed gets its messages."""
        sink = context.socket(zmq.PULL)
        try:
            sink.bind("inproc://returning")
            destinations.send("inproc://returning", [b"first"])
            assert sink.poll(2000) and sink.recv_multipart() == [b"first"]
            destinations.observe(0.0)
            assert destinations.close_idle(5.0, 1.0, nobody) == ["inproc://returning"]
            assert destinations.send("inproc://returning", [b"second"])
            assert sink.poll(2000) and sink.recv_multipart() == [b"second"]
        finally:
            sink.close(linger=0)


class TestCap:
    """DestinationSet(max_destinations=...): a hard cap, the longest idle closed first."""

    def test_one_more_than_the_cap_closes_the_longest_idle(
        self, context: zmq.Context[zmq.Socket[bytes]], counters: Counters, run_dir: Path
    ) -> None:
        """With a cap of 3, a fourth destination closes the one idle longest, its queue
        dropped as destination_cap; there are never more than 3."""
        destinations = DestinationSet(context, counters, hwm=1, backlog_limit=4, max_destinations=3)
        try:
            names = [endpoint(run_dir, f"w{index}") for index in range(5)]
            for index, name in enumerate(names[:3]):
                destinations.send(name, [b"row"])
                destinations.observe(float(index))
            destinations.send(names[0], [b"row"])  # w0 is now the most recent
            destinations.observe(3.0)
            destinations.send(names[3], [b"row"])
            assert [dest.name for dest in destinations] == [names[0], names[2], names[3]]
            assert counters.get("destinations_closed", "cap") == 1
            assert counters.get("dropped", "destination_cap") == 1
            for name in names:
                destinations.send(name, [b"row"])
                assert len(destinations) <= 3
            assert counters.get("destinations_closed", "cap") == 4
        finally:
            destinations.close_all(0.0)

    def test_the_cap_must_be_positive(
        self, context: zmq.Context[zmq.Socket[bytes]], counters: Counters
    ) -> None:
        """A cap of 0 would close every destination it makes: refused."""
        with pytest.raises(ValueError, match="max_destinations"):
            DestinationSet(context, counters, max_destinations=0)


class TestSendOnceLimit:
    """send_once: at most max_lingering_once sockets linger at a time."""

    def test_beyond_the_limit_messages_drop_until_a_linger_ends(
        self, context: zmq.Context[zmq.Socket[bytes]], counters: Counters, run_dir: Path
    ) -> None:
        """Three lingering sockets allowed: the fourth and fifth messages to absent peers
        are dropped as once_limit; once the lingers are over, one is sent again."""
        destinations = DestinationSet(context, counters, max_lingering_once=3)
        linger_s = 0.2
        for index in range(5):
            destinations.send_once(endpoint(run_dir, f"unknown-{index}"), [b"x"], linger_s)
        assert counters.get("dropped", "once_limit") == 2
        assert len(open_sockets(context)) == 0, "send_once keeps no socket of its own"

        def sent_again() -> bool:
            dropped = counters.get("dropped", "once_limit")
            destinations.send_once(endpoint(run_dir, "later"), [b"x"], linger_s)
            return counters.get("dropped", "once_limit") == dropped

        wait_until(sent_again, 5.0, "a send_once accepted after the lingers ended")

    def test_the_limit_must_be_positive(
        self, context: zmq.Context[zmq.Socket[bytes]], counters: Counters
    ) -> None:
        """A limit of 0 would drop every message: refused."""
        with pytest.raises(ValueError, match="max_lingering_once"):
            DestinationSet(context, counters, max_lingering_once=0)
