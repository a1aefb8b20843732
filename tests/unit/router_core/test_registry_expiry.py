"""Tests for the worker registry's expiry at the timeout boundary, the record view it
answers with, and the departed workers it keeps listing for a while."""

from __future__ import annotations

import msgspec
import pytest

from router_core.registry import WorkerRegistry, WorkerState
from router_core.wire.control import Heartbeat
from tests.unit.router_core.registry_workers import TIMEOUT, record_in, registration


class TestExpiry:
    """WorkerRegistry.expire and next_expiry at the timeout boundary."""

    def test_next_expiry_empty(self) -> None:
        """An empty registry has no next expiry."""
        assert WorkerRegistry(TIMEOUT).next_expiry() is None

    def test_next_expiry_is_quietest_plus_timeout(self) -> None:
        """next_expiry is the oldest last_seen plus the timeout."""
        registry = WorkerRegistry(TIMEOUT)
        registry.register(registration("a", "ipc:///a"), now=10.0)
        registry.register(registration("b", "ipc:///b"), now=4.0)
        registry.register(registration("c", "ipc:///c"), now=7.0)
        assert registry.next_expiry() == 4.0 + TIMEOUT
        registry.heartbeat(Heartbeat(worker_id="b"), now=11.0)
        assert registry.next_expiry() == 7.0 + TIMEOUT

    def test_expire_removes_exactly_the_silent_ones(self) -> None:
        """At the boundary a worker is alive; past it, it is marked dead and removed."""
        registry = WorkerRegistry(TIMEOUT)
        old, _ = registry.register(registration("old", "ipc:///old"), now=100.0)
        edge, _ = registry.register(registration("edge", "ipc:///edge"), now=101.0)
        registry.register(registration("fresh", "ipc:///fresh"), now=102.5)
        registry.transition(old, "serving")
        dead = registry.expire(now=103.0)
        assert dead == [old]
        assert old.state == "dead"
        assert registry.get("old") is None
        assert registry.by_address("ipc:///old") is None
        assert edge.state == "starting"
        assert [r.worker_id for r in registry.workers()] == ["edge", "fresh"]
        assert registry.expire(now=103.0) == []

    def test_expire_at_next_expiry_is_boundary(self) -> None:
        """Nothing expires at next_expiry() itself; the quietest expires just after it."""
        registry = WorkerRegistry(TIMEOUT)
        registry.register(registration(), now=8.0)
        due = registry.next_expiry()
        assert due is not None
        assert registry.expire(due) == []
        assert [r.worker_id for r in registry.expire(due + 0.25)] == ["w1"]
        assert registry.next_expiry() is None


class TestRecordView:
    """WorkerRecord.view: the control-reply shape and safe_to_delete."""

    def test_view_fields(self) -> None:
        """The view carries identity, state, counts and seconds since last seen."""
        record = record_in("serving")
        record.inflight, record.heartbeats, record.last_seen = 3, 9, 10.0
        record.requests_sent, record.rows_received = 40, 400
        view = record.view(now=12.5, wall_now=1_000.0)
        assert msgspec.to_builtins(view) == {
            "id": "w",
            "endpoint": "ipc:///run/w",
            "pid": 1,
            "host": "h",
            "version": "v",
            "started_ns": 0,
            "state": "serving",
            "inflight": 3,
            "heartbeats": 9,
            "last_heartbeat_s_ago": 2.5,
            "registered_at": 987.5,
            "last_heartbeat_at": 997.5,
            "requests_sent": 40,
            "rows_received": 400,
            "safe_to_delete": False,
        }

    @pytest.mark.parametrize(
        ("state", "inflight", "safe"),
        [
            ("drained", 0, True),
            ("drained", 1, False),
            ("draining", 0, False),
            ("serving", 0, False),
            ("paused", 0, False),
        ],
    )
    def test_safe_to_delete_only_when_drained_and_idle(
        self, state: WorkerState, inflight: int, safe: bool
    ) -> None:
        """safe_to_delete holds exactly for a drained worker with nothing in flight."""
        record = record_in(state)
        record.inflight = inflight
        assert record.view(now=0.0, wall_now=0.0).safe_to_delete is safe


class TestDepartures:
    """Workers that left stay visible as dead for a while, then are forgotten."""

    def test_departed_worker_is_listed_dead_with_its_reason(self) -> None:
        """A departure keeps the last view, in state dead, with why and when it left."""
        registry = WorkerRegistry(TIMEOUT, departed_ttl_s=60.0)
        record, _ = registry.register(registration(), now=1.0)
        registry.deregister("w1")
        registry.remember_departure(record, "deregistered", now=2.0)
        (departure,) = registry.departed(now=5.0)
        view = departure.view(now=5.0, wall_now=100.0)
        assert view.worker_id == "w1" and view.state == "dead"
        assert view.departure_reason == "deregistered" and view.departed_s_ago == 3.0
        assert view.safe_to_delete is True and view.inflight == 0

    def test_departures_expire_after_the_ttl(self) -> None:
        """A departure older than departed_ttl_s is no longer listed."""
        registry = WorkerRegistry(TIMEOUT, departed_ttl_s=10.0)
        record, _ = registry.register(registration(), now=0.0)
        registry.deregister("w1")
        registry.remember_departure(record, "dead_worker", now=1.0)
        assert len(registry.departed(now=11.0)) == 1
        assert registry.departed(now=11.5) == []

    def test_a_worker_that_comes_back_is_not_listed_as_departed(self) -> None:
        """Registering again under the same id hides the old departure."""
        registry = WorkerRegistry(TIMEOUT)
        record, _ = registry.register(registration(), now=0.0)
        registry.deregister("w1")
        registry.remember_departure(record, "deregistered", now=1.0)
        registry.register(registration(), now=2.0)
        assert registry.departed(now=3.0) == []

    def test_only_the_latest_departure_of_a_worker_is_listed(self) -> None:
        """A worker that left twice is listed once, with its latest reason."""
        registry = WorkerRegistry(TIMEOUT)
        for at, reason in ((1.0, "replaced"), (2.0, "dead_worker")):
            record, _ = registry.register(registration(), now=at - 0.5)
            registry.deregister("w1")
            registry.remember_departure(record, reason, now=at)
        assert [d.reason for d in registry.departed(now=3.0)] == ["dead_worker"]
