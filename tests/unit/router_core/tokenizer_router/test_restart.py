"""A restarted router's core: it starts from its predecessor's saved state, re-drains
the workers an operator drained, and brings the engine into the pause state."""

from __future__ import annotations

from router_core.tokenizer_router.durable import DurableState
from router_core.tokenizer_router.effects import Persist
from router_core.wire import Kind, decode_header
from router_core.wire.control import (
    ENGINE,
    ContinueRequest,
    DrainCommand,
    PauseContinueBroadcast,
    PauseRequest,
    RegistrationReply,
)
from tests.unit.router_core.tokenizer_router.shell import CoreShell, payload_of, sends

#: What the router before this one saved: paused in place by its seventh operation.
SAVED = DurableState(
    incarnation=100,
    paused=True,
    mode="in_place",
    op_id="100-7",
    seq=7,
    since=1_699_999_000.0,
    drained=["w9"],
)


def restarted(saved: DurableState = SAVED) -> CoreShell:
    return CoreShell(incarnation=101, restored=saved)


class TestRestoredState:
    def test_status_is_the_saved_pause_state(self) -> None:
        """Paused, its mode, op id and since: as saved, before anyone registers."""
        shell = restarted()
        state = shell.core.pause.state
        assert (state.paused, state.mode, state.op_id) == (True, "in_place", "100-7")
        assert shell.core.pause.state_since_wall() == SAVED.since

    def test_a_reregistering_worker_is_told_the_saved_state_and_the_incarnation(self) -> None:
        """The reply carries the saved op id and this router's incarnation."""
        shell = restarted()
        reply = payload_of(sends(shell.register("w1"))[0], RegistrationReply)
        assert (reply.paused, reply.pause_mode, reply.op_id) == (True, "in_place", "100-7")
        assert reply.incarnation == 101
        assert shell.core.registry.get("w1").state == "paused"  # type: ignore[union-attr]

    def test_operations_count_on_under_the_new_incarnation(self) -> None:
        """The next operation is 101-8: after every one of the old router's."""
        shell = restarted()
        shell.register("w1")
        handled = shell.command("continue")
        broadcast = payload_of(sends(handled.effects)[0], PauseContinueBroadcast)
        assert broadcast.op_id == "101-8"
        persist = handled.effects[0]
        assert isinstance(persist, Persist)
        assert (persist.state.incarnation, persist.state.seq, persist.state.paused) == (
            101,
            8,
            False,
        )

    def test_a_marked_worker_is_drained_again_right_after_its_reply(self) -> None:
        """w9 was drained: its reply is followed by a DRAIN, and it shows draining."""
        shell = restarted()
        out = sends(shell.register("w9"))
        kinds = [decode_header(send.frames[0]).kind for send in out]
        assert kinds == [Kind.REGISTER_REPLY, Kind.DRAIN]
        assert payload_of(out[1], DrainCommand) == DrainCommand("w9", True)
        assert shell.core.registry.get("w9").state == "draining"  # type: ignore[union-attr]

    def test_a_clean_deregistration_forgets_the_mark(self) -> None:
        """A drained worker that leaves is done: the mark goes, and is saved gone."""
        shell = restarted()
        shell.register("w9")
        effects = shell.deregister("w9")
        assert isinstance(effects[0], Persist) and effects[0].state.drained == []
        assert "w9" not in shell.core.drain_marks


class TestEngineBroughtInStep:
    def test_the_first_load_report_gets_the_saved_pause(self) -> None:
        """The engine's first report to the new router: it is sent PAUSE 100-7 again."""
        shell = restarted()
        out = sends(shell.engine_load(engine_started_ns=5))
        assert out[0].to == ENGINE and decode_header(out[0].frames[0]).kind is Kind.PAUSE
        assert payload_of(out[0], PauseRequest) == PauseRequest("100-7", "in_place")
        assert sends(shell.engine_load(engine_started_ns=5)) == []  # once per incarnation

    def test_a_restarted_engine_gets_the_current_state_again(self) -> None:
        """A new engine_started_ns: the current state (a continue now) once more."""
        shell = restarted()
        shell.engine_load(engine_started_ns=5)
        shell.command("continue")
        out = sends(shell.engine_load(engine_started_ns=6))
        assert payload_of(out[0], ContinueRequest) == ContinueRequest("101-8")

    def test_a_fresh_router_sends_nothing_before_any_operation(self) -> None:
        """No operation yet, nothing to bring the engine into."""
        shell = CoreShell()
        assert sends(shell.engine_load(engine_started_ns=5)) == []
