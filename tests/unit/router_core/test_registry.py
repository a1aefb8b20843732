"""Tests for the worker registry: transitions, registration and heartbeats."""

from __future__ import annotations

import itertools

import pytest

from router_core.registry import ALLOWED_TRANSITIONS, WorkerRecord, WorkerRegistry, WorkerState
from router_core.wire.control import Heartbeat
from tests.unit.router_core.registry_workers import STATES, TIMEOUT, record_in, registration


def _pairs(allowed: bool) -> list[object]:
    return [
        pytest.param(old, new, id=f"{old}->{new}")
        for old, new in itertools.product(STATES, STATES)
        if old != new and (new in ALLOWED_TRANSITIONS[old]) == allowed
    ]


class TestTransitions:
    """WorkerRegistry.transition follows ALLOWED_TRANSITIONS exactly."""

    def test_table_covers_every_state(self) -> None:
        """Every WorkerState has a row, and every target is a WorkerState."""
        assert set(ALLOWED_TRANSITIONS) == set(STATES)
        for targets in ALLOWED_TRANSITIONS.values():
            assert targets <= set(STATES)

    def test_dead_is_terminal(self) -> None:
        """Nothing leaves ``dead``, and every stored live state can reach it
        (``unresponsive`` is only shown, never stored: no transition has it)."""
        assert ALLOWED_TRANSITIONS["dead"] == frozenset()
        assert ALLOWED_TRANSITIONS["unresponsive"] == frozenset()
        stored = [s for s in STATES if s not in ("dead", "unresponsive")]
        assert all("dead" in ALLOWED_TRANSITIONS[s] for s in stored)
        assert not any("unresponsive" in targets for targets in ALLOWED_TRANSITIONS.values())

    def test_a_silent_worker_is_shown_unresponsive_until_it_speaks(self) -> None:
        """Past half the heartbeat timeout a registered worker is shown unresponsive (its
        stored state unchanged); a heartbeat shows it as it was."""
        registry = WorkerRegistry(heartbeat_timeout_s=4.0)
        record = record_in("serving")
        record.last_seen = 10.0
        assert record.view(11.9, 0.0, registry.unresponsive_after_s).state == "serving"
        assert record.view(12.1, 0.0, registry.unresponsive_after_s).state == "unresponsive"
        assert record.state == "serving"
        record.last_seen = 12.1
        assert record.view(12.2, 0.0, registry.unresponsive_after_s).state == "serving"

    @pytest.mark.parametrize(("old", "new"), _pairs(allowed=True))
    def test_allowed_transition_moves(self, old: WorkerState, new: WorkerState) -> None:
        """An allowed transition returns True and changes the state."""
        record = record_in(old)
        assert WorkerRegistry.transition(record, new) is True
        assert record.state == new

    @pytest.mark.parametrize(("old", "new"), _pairs(allowed=False))
    def test_forbidden_transition_is_refused(self, old: WorkerState, new: WorkerState) -> None:
        """A forbidden transition returns False and leaves the state unchanged."""
        record = record_in(old)
        assert WorkerRegistry.transition(record, new) is False
        assert record.state == old

    @pytest.mark.parametrize("state", STATES)
    def test_same_state_is_a_successful_no_op(self, state: WorkerState) -> None:
        """Moving to the current state succeeds without change."""
        record = record_in(state)
        assert WorkerRegistry.transition(record, state) is True
        assert record.state == state


class TestRegister:
    """WorkerRegistry.register: add, refresh, restart at a new address, address takeover."""

    def test_rejects_non_positive_timeout(self) -> None:
        """A registry needs a positive heartbeat timeout."""
        with pytest.raises(ValueError):
            WorkerRegistry(0)

    def test_new_worker_starts_in_starting(self) -> None:
        """A first registration creates a ``starting`` record, indexed by id and address."""
        registry = WorkerRegistry(TIMEOUT)
        record, replaced = registry.register(registration(pid=7, host="h", version="1"), now=5.0)
        assert replaced == []
        assert record.state == "starting"
        assert (record.pid, record.host, record.version) == (7, "h", "1")
        assert record.registered_at == record.last_seen == 5.0
        assert registry.get("w1") is record
        assert registry.by_address("ipc:///run/w1") is record
        assert len(registry) == 1

    def test_repeated_registration_is_idempotent(self) -> None:
        """The same registration again returns the same record, refreshed, state kept."""
        registry = WorkerRegistry(TIMEOUT)
        first, _ = registry.register(registration(pid=1), now=1.0)
        registry.transition(first, "draining")
        again, replaced = registry.register(registration(pid=2), now=3.0)
        assert again is first
        assert replaced == []
        assert again.state == "draining"
        assert again.pid == 2
        assert again.last_seen == 3.0
        assert again.registered_at == 1.0
        assert len(registry) == 1

    def test_new_address_replaces_the_old_incarnation(self) -> None:
        """A worker id at a new address gets a fresh record; the old record is returned."""
        registry = WorkerRegistry(TIMEOUT)
        old, _ = registry.register(registration(address="ipc:///run/a"), now=1.0)
        registry.transition(old, "serving")
        new, replaced = registry.register(registration(address="ipc:///run/b"), now=2.0)
        assert replaced == [old]
        assert replaced[0].address == "ipc:///run/a"
        assert new is not old
        assert new.state == "starting"
        assert registry.get("w1") is new
        assert registry.by_address("ipc:///run/a") is None
        assert registry.by_address("ipc:///run/b") is new
        assert len(registry) == 1

    def test_address_taken_over_by_another_worker(self) -> None:
        """A new worker id at a held address evicts and returns the holder."""
        registry = WorkerRegistry(TIMEOUT)
        holder, _ = registry.register(registration("a", "ipc:///run/shared"), now=1.0)
        taker, replaced = registry.register(registration("b", "ipc:///run/shared"), now=2.0)
        assert replaced == [holder]
        assert registry.get("a") is None
        assert registry.get("b") is taker
        assert registry.by_address("ipc:///run/shared") is taker
        assert [r.worker_id for r in registry.workers()] == ["b"]

    def test_moving_onto_a_held_address_replaces_both(self) -> None:
        """A worker moving to another's address returns both the holder and its old self."""
        registry = WorkerRegistry(TIMEOUT)
        holder, _ = registry.register(registration("a", "ipc:///run/1"), now=1.0)
        mover, _ = registry.register(registration("b", "ipc:///run/2"), now=1.0)
        moved, replaced = registry.register(registration("b", "ipc:///run/1"), now=2.0)
        assert replaced == [holder, mover]
        assert {r.address for r in replaced} == {"ipc:///run/1", "ipc:///run/2"}
        assert registry.workers() == [moved]
        assert registry.by_address("ipc:///run/2") is None

    def test_workers_in_registration_order(self) -> None:
        """workers() lists records in the order they registered."""
        registry = WorkerRegistry(TIMEOUT)
        for name in ("c", "a", "b"):
            registry.register(registration(name, f"ipc:///run/{name}"), now=0.0)
        assert [r.worker_id for r in registry.workers()] == ["c", "a", "b"]

    def test_deregister(self) -> None:
        """deregister forgets a worker and returns it; None for an unknown one."""
        registry = WorkerRegistry(TIMEOUT)
        record, _ = registry.register(registration(), now=0.0)
        assert registry.deregister("w1") is record
        assert registry.deregister("w1") is None
        assert registry.by_address(record.address) is None
        assert len(registry) == 0


class TestHeartbeat:
    """WorkerRegistry.heartbeat: liveness, inflight and the reported state."""

    def test_unknown_worker_returns_none(self) -> None:
        """A heartbeat from an unregistered worker returns None and registers nothing."""
        registry = WorkerRegistry(TIMEOUT)
        assert registry.heartbeat(Heartbeat(worker_id="ghost"), now=1.0) is None
        assert len(registry) == 0

    def test_refreshes_and_applies_state(self) -> None:
        """A heartbeat updates last_seen, counts itself, copies inflight and moves the state."""
        registry = WorkerRegistry(TIMEOUT)
        registry.register(registration(), now=0.0)
        record = registry.heartbeat(Heartbeat(worker_id="w1", state="paused", inflight=4), now=1.5)
        assert record is not None
        assert (record.last_seen, record.heartbeats, record.inflight) == (1.5, 1, 4)
        assert record.state == "paused"

    def test_forbidden_reported_state_is_ignored(self) -> None:
        """A heartbeat naming a state the record may not move to leaves the state alone."""
        registry = WorkerRegistry(TIMEOUT)
        record, _ = registry.register(registration(), now=0.0)
        registry.transition(record, "serving")
        registry.heartbeat(Heartbeat(worker_id="w1", state="starting"), now=1.0)
        assert record.state == "serving"
        assert record.last_seen == 1.0


class TestCrossingDrainCommands:
    """Heartbeats sent before a drain or undrain command arrived do not undo it."""

    def _serving(self) -> tuple[WorkerRegistry, WorkerRecord]:
        registry = WorkerRegistry(TIMEOUT)
        record, _ = registry.register(registration(), now=0.0)
        registry.transition(record, "serving")
        return registry, record

    def test_serving_heartbeat_crossing_a_drain_keeps_it(self) -> None:
        """After a drain command, a heartbeat still saying serving leaves the record draining."""
        registry, record = self._serving()
        assert registry.command_drain(record)
        assert record.state == "draining"
        registry.heartbeat(Heartbeat(worker_id="w1", state="serving"), now=1.0)
        assert record.state == "draining"
        registry.heartbeat(Heartbeat(worker_id="w1", state="drained"), now=1.5)
        assert record.state == "drained"

    def test_drained_heartbeat_crossing_an_undrain_keeps_it(self) -> None:
        """After undrain, a heartbeat still saying drained leaves the record serving,
        until the worker confirms it admits again."""
        registry, record = self._serving()
        registry.transition(record, "drained")
        assert registry.command_undrain(record, "serving")
        assert record.state == "serving"
        registry.heartbeat(Heartbeat(worker_id="w1", state="drained"), now=1.0)
        assert record.state == "serving"
        registry.heartbeat(Heartbeat(worker_id="w1", state="serving"), now=1.5)
        assert record.drain_command is None
        registry.heartbeat(Heartbeat(worker_id="w1", state="draining"), now=2.0)
        assert record.state == "draining"
