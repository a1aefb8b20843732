"""The worker's side of the registry protocol (``WorkerSession``), as pure state: what each
message from the router does to it and what it sends back."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from router_core.wire import Kind, decode_header, decode_payload
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    DrainCommand,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
    WorkerRegistration,
    op_order,
)
from router_core.worker_link import WorkerIdentity, WorkerSession

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"


@pytest.fixture
def session() -> WorkerSession:
    """A fresh, unregistered session of worker w0."""
    identity = WorkerIdentity(
        "w0", ADDRESS, pid=4242, host="box", version="1.2.3", started_ns=1_000
    )
    return WorkerSession(identity)


@pytest.fixture
def registered(session: WorkerSession) -> WorkerSession:
    """w0, accepted by a router that is not paused (its last op is number 3)."""
    session.on_registration_reply(
        RegistrationReply(
            worker_id="w0", accepted=True, op_id="5-3", heartbeat_interval_s=0.25, incarnation=5
        )
    )
    return session


def decoded(frames: list[bytes]) -> tuple[Kind, Any]:
    """The kind and payload of one framed control message."""
    assert len(frames) == 2
    kind = decode_header(frames[0]).kind
    return kind, decode_payload(kind, frames[1])


def pause(op_id: str, mode: str = "in_place") -> PauseContinueBroadcast:
    return PauseContinueBroadcast(op_id=op_id, is_pause=True, mode=mode)  # type: ignore[arg-type]


def resume(op_id: str) -> PauseContinueBroadcast:
    return PauseContinueBroadcast(op_id=op_id, is_pause=False)


class TestOpOrder:
    @pytest.mark.parametrize(
        ("op_id", "order"),
        [("17-7", (17, 7)), ("0-1", (0, 1)), ("a1b2-7", None), ("plain", None), ("9-", None)],
    )
    def test_order_is_incarnation_then_sequence(self, op_id: str, order: Any) -> None:
        """``<incarnation>-<seq>``, both decimal; any other id has no order."""
        assert op_order(op_id) == order

    def test_empty_op_id_has_no_order(self) -> None:
        """An empty op id (a router that never paused) has no order."""
        assert op_order("") is None

    def test_a_newer_incarnation_orders_after_any_sequence(self) -> None:
        """Every operation of a restarted router comes after every one of its predecessor."""
        older, newer = op_order("100-9000"), op_order("101-1")
        assert older is not None and newer is not None and newer > older


class TestRouterIncarnations:
    """A router restart: its replies and operations win over everything of the old one."""

    def test_a_restarted_routers_state_wins_over_a_higher_sequence(
        self, registered: WorkerSession
    ) -> None:
        """Paused by op 5-9; the new router (incarnation 6, no operation yet) says serving:
        serving, and a restart is counted."""
        registered.on_pause_broadcast(pause("5-9"))
        assert registered.paused
        registered.on_registration_reply(
            RegistrationReply(worker_id="w0", accepted=True, paused=False, incarnation=6)
        )
        assert not registered.paused
        assert (registered.router_incarnation, registered.router_restarts) == (6, 1)

    def test_a_restored_older_op_id_from_a_new_router_applies(
        self, registered: WorkerSession
    ) -> None:
        """The new router restored op 5-9 (paused) from its state file: the worker pauses
        even though 5-9 is the op it applied last, and then takes 6-10's continue."""
        registered.on_pause_broadcast(pause("5-9", "retract"))
        registered.on_registration_reply(
            RegistrationReply(
                worker_id="w0",
                accepted=True,
                paused=True,
                pause_mode="retract",
                op_id="5-9",
                incarnation=6,
            )
        )
        assert (registered.paused, registered.pause_mode) == (True, "retract")
        registered.on_pause_broadcast(resume("6-10"))
        assert not registered.paused

    def test_a_late_operation_of_the_old_router_changes_nothing(
        self, registered: WorkerSession
    ) -> None:
        """After the new router's continue 6-1, the old router's pause 5-50 (still queued)
        is acknowledged and ignored."""
        registered.on_pause_broadcast(resume("6-1"))
        replies = registered.on_pause_broadcast(pause("5-50"))
        assert not registered.paused
        assert decoded(replies[0]) == (Kind.ACK, Acknowledgement(op_id="5-50", participant="w0"))

    def test_a_broadcast_teaches_the_incarnation(self, registered: WorkerSession) -> None:
        """A broadcast of a newer router makes its incarnation known; a reply of the same
        incarnation with an older op afterwards does not undo the broadcast."""
        registered.on_pause_broadcast(pause("7-2"))
        assert registered.router_incarnation == 7
        registered.on_registration_reply(
            RegistrationReply(worker_id="w0", accepted=True, op_id="7-1", incarnation=7)
        )
        assert registered.paused


class TestRegistration:
    def test_new_session_is_starting_and_not_admitting(self, session: WorkerSession) -> None:
        """Before the router accepts it the worker reports starting and admits nothing."""
        assert session.state == "starting"
        assert not session.registered and not session.admitting

    def test_registration_carries_the_identity(self, session: WorkerSession) -> None:
        """The registration message names the worker's id, address, pid, host, version
        and start time."""
        kind, payload = decoded(session.registration())
        assert kind is Kind.REGISTER
        assert payload == WorkerRegistration(
            worker_id="w0", address=ADDRESS, pid=4242, host="box", version="1.2.3", started_ns=1_000
        )

    def test_accepted_reply_registers_with_the_named_interval(self, session: WorkerSession) -> None:
        """An accepted reply registers the worker (serving, admitting), adopts the
        router's heartbeat interval and asks nothing back."""
        reply = RegistrationReply(worker_id="w0", accepted=True, heartbeat_interval_s=0.25)
        assert session.on_registration_reply(reply) == []
        assert session.registered and session.admitting
        assert session.state == "serving"
        assert session.heartbeat_interval_s == 0.25

    def test_reply_without_an_interval_keeps_the_default(self, session: WorkerSession) -> None:
        """A reply naming no heartbeat interval (0) leaves the 1 s default."""
        session.on_registration_reply(
            RegistrationReply(worker_id="w0", accepted=True, heartbeat_interval_s=0.0)
        )
        assert session.heartbeat_interval_s == 1.0

    def test_accepted_reply_of_a_paused_router_pauses_the_worker(
        self, session: WorkerSession
    ) -> None:
        """A late joiner takes the router's pause state (and mode) from the reply."""
        session.on_registration_reply(
            RegistrationReply(
                worker_id="w0", accepted=True, paused=True, pause_mode="retract", op_id="5-4"
            )
        )
        assert session.registered and session.paused
        assert session.pause_mode == "retract"
        assert session.state == "paused" and not session.admitting

    def test_refused_reply_asks_to_register_again(self, registered: WorkerSession) -> None:
        """A refusal (the router forgot the worker) unregisters it and answers with a
        fresh registration."""
        replies = registered.on_registration_reply(
            RegistrationReply(worker_id="w0", accepted=False, reason="unknown_worker")
        )
        assert not registered.registered and registered.state == "starting"
        assert [decoded(frames)[0] for frames in replies] == [Kind.REGISTER]

    def test_reply_for_another_worker_is_ignored(self, session: WorkerSession) -> None:
        """A reply naming another worker id changes nothing and sends nothing."""
        reply = RegistrationReply(worker_id="w1", accepted=True)
        assert session.on_registration_reply(reply) == []
        assert not session.registered

    def test_reply_older_than_the_applied_pause_keeps_the_pause(
        self, registered: WorkerSession
    ) -> None:
        """A registration reply carrying an older op than the pause already applied does
        not undo that pause."""
        registered.on_pause_broadcast(pause("5-5", "abort"))
        registered.on_registration_reply(
            RegistrationReply(worker_id="w0", accepted=True, paused=False, op_id="5-4")
        )
        assert registered.paused and registered.pause_mode == "abort"


class TestPauseBroadcasts:
    def test_pause_applies_and_is_acknowledged(self, registered: WorkerSession) -> None:
        """A pause sets the paused state and mode and is acknowledged by this worker."""
        replies = registered.on_pause_broadcast(pause("5-4", "in_place"))
        assert registered.paused and registered.pause_mode == "in_place"
        assert registered.state == "paused" and not registered.admitting
        assert [decoded(frames) for frames in replies] == [
            (Kind.ACK, Acknowledgement(op_id="5-4", participant="w0"))
        ]

    def test_continue_resumes(self, registered: WorkerSession) -> None:
        """A newer continue clears the pause and its mode."""
        registered.on_pause_broadcast(pause("5-4"))
        registered.on_pause_broadcast(resume("5-5"))
        assert not registered.paused and registered.pause_mode is None
        assert registered.state == "serving" and registered.admitting

    def test_older_operation_is_acknowledged_but_not_applied(
        self, registered: WorkerSession
    ) -> None:
        """A continue older than the applied pause (arriving late) leaves the worker
        paused, yet is acknowledged so its barrier does not wait on this worker."""
        registered.on_pause_broadcast(pause("5-7", "retract"))
        replies = registered.on_pause_broadcast(resume("5-6"))
        assert registered.paused and registered.pause_mode == "retract"
        assert [decoded(frames) for frames in replies] == [
            (Kind.ACK, Acknowledgement(op_id="5-6", participant="w0"))
        ]

    def test_operations_apply_in_sequence_order_whatever_the_arrival_order(
        self, registered: WorkerSession
    ) -> None:
        """Whatever order broadcasts n-4..n-9 arrive in, the state is that of the highest
        sequence, and every one of them is acknowledged."""
        ops = [pause("5-8", "abort"), resume("5-9"), pause("5-4"), resume("5-6"), pause("5-5")]
        acked = []
        for op in ops:
            acked += [decoded(frames)[1].op_id for frames in registered.on_pause_broadcast(op)]
        assert acked == [op.op_id for op in ops]
        assert not registered.paused and registered.pause_mode is None

    def test_unregistered_worker_still_acknowledges(self, session: WorkerSession) -> None:
        """A worker the router has not accepted yet acknowledges a pause too."""
        replies = session.on_pause_broadcast(pause("5-1"))
        assert [decoded(frames)[0] for frames in replies] == [Kind.ACK]
        assert session.state == "starting"


class TestDrain:
    def test_drain_when_idle_is_drained_at_once(self, registered: WorkerSession) -> None:
        """Draining with nothing in flight reports drained; it still admits (what its
        held connections bring), while stopping does not."""
        assert registered.on_drain(DrainCommand(worker_id="w0", drain=True))
        assert registered.state == "drained" and registered.admitting
        registered.stopping = True
        assert not registered.admitting

    def test_drain_with_inflight_requests_is_draining_until_empty(
        self, registered: WorkerSession
    ) -> None:
        """With requests in flight the state is draining, and drained once they leave."""
        registered.inflight.update({"r1", "r2"})
        assert registered.on_drain(DrainCommand(worker_id="w0"))
        assert registered.state == "draining"
        registered.inflight.discard("r1")
        assert registered.state == "draining"
        registered.inflight.discard("r2")
        assert registered.state == "drained"

    def test_undrain_serves_again(self, registered: WorkerSession) -> None:
        """Undrain returns a drained worker to serving and admitting."""
        registered.on_drain(DrainCommand(worker_id="w0"))
        assert registered.on_drain(DrainCommand(worker_id="w0", drain=False))
        assert registered.state == "serving" and registered.admitting

    def test_repeated_drain_reports_no_change(self, registered: WorkerSession) -> None:
        """A second drain changes nothing and says so."""
        registered.on_drain(DrainCommand(worker_id="w0"))
        assert not registered.on_drain(DrainCommand(worker_id="w0"))
        assert registered.state == "drained"

    def test_drain_for_another_worker_is_ignored(self, registered: WorkerSession) -> None:
        """A drain command naming another worker changes nothing."""
        assert not registered.on_drain(DrainCommand(worker_id="w1"))
        assert registered.state == "serving" and not registered.draining

    def test_draining_outranks_paused(self, registered: WorkerSession) -> None:
        """A paused worker that is draining reports draining/drained, not paused."""
        registered.on_pause_broadcast(pause("5-4"))
        registered.inflight.add("r1")
        registered.on_drain(DrainCommand(worker_id="w0"))
        assert registered.state == "draining"

    def test_stopping_reports_like_draining(self, registered: WorkerSession) -> None:
        """A worker shutting down stops admitting and reports draining, then drained."""
        registered.inflight.add("r1")
        registered.stopping = True
        assert registered.state == "draining" and not registered.admitting
        registered.inflight.clear()
        assert registered.state == "drained"


class TestOutbound:
    def test_heartbeats_count_up_and_carry_the_state(self, registered: WorkerSession) -> None:
        """Each heartbeat has the next sequence number, the state, the in-flight count
        and the worker's address."""
        first = decoded(registered.heartbeat())
        registered.inflight.add("r1")
        registered.on_pause_broadcast(pause("5-4"))
        second = decoded(registered.heartbeat())
        assert first == (
            Kind.HEARTBEAT,
            Heartbeat(worker_id="w0", seq=1, state="serving", inflight=0, address=ADDRESS),
        )
        assert second == (
            Kind.HEARTBEAT,
            Heartbeat(worker_id="w0", seq=2, state="paused", inflight=1, address=ADDRESS),
        )

    def test_deregistration_names_the_reason(self, registered: WorkerSession) -> None:
        """The deregistration message names the worker and why it leaves."""
        assert decoded(registered.deregistration("restart")) == (
            Kind.DEREGISTER,
            Deregistration(worker_id="w0", reason="restart"),
        )

    def test_only_newer_load_snapshots_are_kept(self, session: WorkerSession) -> None:
        """A load snapshot older than the one held is ignored."""
        newer = LoadSnapshot(running=3, taken_ns=200)
        session.on_load(newer)
        session.on_load(LoadSnapshot(running=1, taken_ns=100))
        assert session.load == newer
        latest = LoadSnapshot(running=5, taken_ns=300)
        session.on_load(latest)
        assert msgspec.structs.asdict(session.load) == msgspec.structs.asdict(latest)
