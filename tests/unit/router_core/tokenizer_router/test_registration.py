"""The tokenizer router's registry handlers, driven in-process: registration, heartbeats,
departures and expiry, with no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from router_core.tokenizer_router.effects import Forget, Send
from router_core.wire import Kind, decode_header
from router_core.wire.control import RegistrationReply
from tests.unit.router_core.tokenizer_router.shell import (
    ENDPOINTS,
    CoreShell,
    address_of,
    forgets,
    payload_of,
    sends,
)


class TestRegistration:
    """A worker registers and is answered with the pause state to start in."""

    def test_registration_is_accepted_with_the_heartbeat_interval(self) -> None:
        """The reply goes to the worker's address, accepted, not paused, counted on control."""
        shell = CoreShell()
        (reply,) = shell.register("w1")
        assert isinstance(reply, Send)
        assert reply.to == address_of("w1") and reply.traffic == ("control", "w1")
        assert decode_header(reply.frames[0]).kind is Kind.REGISTER_REPLY
        answer = payload_of(reply, RegistrationReply)
        assert (answer.accepted, answer.paused, answer.heartbeat_interval_s) == (True, False, 1.0)
        record = shell.core.registry.get("w1")
        assert record is not None and record.state == "serving"
        assert shell.core.counters.get("registrations", "accepted") == 1
        assert shell.core.traffic.totals()[("control", "w1")][0] == 1

    def test_a_worker_joining_a_paused_stack_starts_paused(self) -> None:
        """Registered after a pause, a worker gets the pause's mode and op id, state paused."""
        shell = CoreShell()
        handled = shell.command("pause", mode="in_place")
        answer = payload_of(sends(shell.register("late"))[0], RegistrationReply)
        assert (answer.paused, answer.pause_mode) == (True, "in_place")
        assert answer.op_id == handled.reply.op_id == "1-1"
        record = shell.core.registry.get("late")
        assert record is not None and record.state == "paused"

    def test_a_new_address_replaces_the_old_registration(self) -> None:
        """A worker back with a new address: the old socket is closed before the reply."""
        shell = CoreShell()
        shell.register("w1", "ipc:///run/sb/old")
        effects = shell.register("w1", "ipc:///run/sb/new")
        assert effects[0] == Forget("ipc:///run/sb/old", "replaced")
        assert isinstance(effects[-1], Send) and effects[-1].to == "ipc:///run/sb/new"
        record = shell.core.registry.get("w1")
        assert record is not None and record.address == "ipc:///run/sb/new"
        assert shell.core.registry.by_address("ipc:///run/sb/old") is None

    @pytest.mark.parametrize(
        ("worker_id", "address", "reason"),
        [
            ("engine", address_of("x"), "bad_worker_id"),
            ("", address_of("x"), "bad_worker_id"),
            ("w1", "tcp://10.0.0.1:5000", "bad_address"),
            ("w1", ENDPOINTS.control, "bad_address"),
            ("w1", "ipc:///run/sb/refused", "bad_address"),
        ],
    )
    def test_a_bad_registration_is_refused_and_counted(
        self, worker_id: str, address: str, reason: str
    ) -> None:
        """A reserved or empty id, a remote or own endpoint, or an address the shell cannot
        connect to: no reply, nothing registered, one reject with the reason."""
        shell = CoreShell(refuse={"ipc:///run/sb/refused"})
        assert shell.register(worker_id, address) == []
        assert len(shell.core.registry) == 0
        assert shell.core.counters.get("rejected", reason) == 1


class TestHeartbeats:
    """Heartbeats refresh a worker; silence past the timeout makes it dead."""

    def test_a_heartbeat_updates_the_record(self) -> None:
        """State, in-flight and totals come from the heartbeat; nothing is sent back."""
        shell = CoreShell()
        shell.register("w1")
        assert shell.heartbeat("w1", state="draining", inflight=3, requests_sent=7) == []
        record = shell.core.registry.get("w1")
        assert record is not None
        assert (record.state, record.inflight, record.requests_sent) == ("draining", 3, 7)

    def test_a_stranger_is_told_to_register_again(self) -> None:
        """An unknown worker's heartbeat gets a refusal on a throwaway socket, counted."""
        shell = CoreShell()
        (reply,) = shell.heartbeat("ghost")
        assert isinstance(reply, Send) and reply.once and reply.to == address_of("ghost")
        assert payload_of(reply, RegistrationReply).accepted is False
        assert shell.core.counters.get("rejected", "unknown_worker") == 1

    def test_silence_past_the_timeout_is_death(self) -> None:
        """A worker silent past the timeout departs: its socket closes, it shows as dead."""
        shell = CoreShell(heartbeat_timeout_s=2.0)
        shell.register("w1")
        shell.register("w2")
        shell.advance(1.5)
        shell.heartbeat("w2")
        assert shell.tick() == []
        shell.advance(1.0)
        assert forgets(shell.tick()) == [Forget(address_of("w1"), "dead_worker")]
        assert [r.worker_id for r in shell.core.registry.workers()] == ["w2"]
        assert shell.core.counters.get("dead_workers", "heartbeat_timeout") == 1
        (view,) = shell.core.view.workers(shell.at, include_departed=True)[1:]
        assert (view.worker_id, view.state, view.departure_reason) == ("w1", "dead", "dead_worker")

    def test_deregistration_forgets_the_worker(self) -> None:
        """A clean leave closes the socket with reason deregistered and counts the reason."""
        shell = CoreShell()
        shell.register("w1")
        effects = shell.deregister("w1", "shutdown")
        assert effects == [Forget(address_of("w1"), "deregistered")]
        assert shell.core.counters.get("deregistrations", "shutdown") == 1
        assert shell.deregister("w1") == []
        assert shell.core.counters.get("rejected", "unknown_worker") == 1


class TestRegistryBounds:
    def test_registrations_beyond_the_cap_are_refused(self, monkeypatch: Any) -> None:
        """A full registry refuses a new worker (counted), but still refreshes known ones."""
        from router_core.tokenizer_router import registration

        monkeypatch.setattr(registration, "MAX_WORKERS", 2)
        shell = CoreShell()
        assert sends(shell.register("w1")) and sends(shell.register("w2"))
        assert sends(shell.register("w3")) == []
        assert shell.core.counters.snapshot()["rejected"]["registry_full"] == 1
        assert sends(shell.register("w1"))  # a known worker registers again

    def test_deregistration_reasons_are_a_closed_set_of_labels(self) -> None:
        """A worker's free-text reason never becomes a label of its own."""
        shell = CoreShell()
        for worker_id, reason in (("w1", "shutdown"), ("w2", "x" * 30), ("w3", "")):
            shell.register(worker_id)
            shell.deregister(worker_id, reason)
        labels = shell.core.counters.snapshot()["deregistrations"]
        assert labels == {"shutdown": 1, "other": 1, "unspecified": 1}
