"""The pause coordinator through the router's handlers: broadcasts, acknowledgements,
stragglers, and many operations in flight at once — in-process, no sockets."""

from __future__ import annotations

import random

import msgspec

from router_core.control.table import DEFERRED
from router_core.tokenizer_router.effects import Persist, Send
from router_core.wire import Kind, decode_header
from router_core.wire.control import ENGINE, PauseContinueBroadcast, PauseRequest
from tests.unit.router_core.tokenizer_router.shell import (
    CoreShell,
    address_of,
    answers,
    payload_of,
    sends,
)


def stack_with(*workers: str) -> CoreShell:
    """A core with ``workers`` registered and a live engine."""
    shell = CoreShell()
    for worker in workers:
        shell.register(worker)
    shell.engine_load(running=1)
    return shell


class TestBroadcast:
    """A pause reaches every registered worker and the engine."""

    def test_pause_broadcasts_and_commands_the_engine(self) -> None:
        """One broadcast per worker (route broadcast) and a PAUSE to the engine; deferred."""
        shell = stack_with("w1", "w2")
        handled = shell.command("pause", mode="retract")
        assert handled.reply is DEFERRED
        out = sends(handled.effects)
        assert [send.to for send in out] == [address_of("w1"), address_of("w2"), ENGINE]
        assert out[0].traffic == ("broadcast", "w1")
        broadcast = payload_of(out[0], PauseContinueBroadcast)
        assert (broadcast.op_id, broadcast.is_pause, broadcast.mode) == ("1-1", True, "retract")
        assert decode_header(out[2].frames[0]).kind is Kind.PAUSE
        assert payload_of(out[2], PauseRequest) == PauseRequest("1-1", "retract")

    def test_an_operation_without_participants_answers_at_once(self) -> None:
        """No worker and no live engine: the reply is the complete outcome."""
        shell = CoreShell()
        handled = shell.command("continue")
        assert handled.reply.complete is True and handled.reply.acked == []
        assert shell.core.pause.pending == []


class TestBarrier:
    """The answer waits for every participant, or names the stragglers at the timeout."""

    def test_every_acknowledgement_completes_the_operation(self) -> None:
        """The last ack answers the caller; the workers take the paused state."""
        shell = stack_with("w1", "w2")
        shell.command("pause", mode="abort")
        assert answers(shell.ack("w1", "1-1")) == []
        assert answers(shell.ack(ENGINE, "1-1")) == []
        (answer,) = answers(shell.ack("w2", "1-1"))
        assert answer.outcome.complete and answer.outcome.acked == ["engine", "w1", "w2"]
        assert answer.waiter.request_id == 1
        assert {r.state for r in shell.core.registry.workers()} == {"paused"}

    def test_a_straggler_is_named_at_the_timeout(self) -> None:
        """w2 never acknowledges: at the deadline the answer names it, and it is counted."""
        shell = stack_with("w1", "w2")
        shell.command("pause", mode="abort", timeout_s=2.0)
        shell.ack("w1", "1-1")
        shell.ack(ENGINE, "1-1")
        shell.advance(1.9)
        assert answers(shell.tick()) == []
        shell.advance(0.2)
        (answer,) = answers(shell.tick())
        outcome = answer.outcome
        assert (outcome.complete, outcome.stragglers, outcome.acked) == (
            False,
            ["w2"],
            ["engine", "w1"],
        )
        assert outcome.elapsed_s == 2.1 and outcome.finished_at == round(shell.at.wall, 3)
        assert shell.core.counters.get("pause_timeouts", "pause") == 1
        counts = [msgspec.to_builtins(c) for c in shell.core.pause.finished_counts()]
        assert counts == [{"operation": "pause", "mode": "abort", "result": "timeout", "count": 1}]

    def test_a_straggler_that_dies_releases_the_barrier(self) -> None:
        """A participant that departs counts as done: the operation completes."""
        shell = stack_with("w1", "w2")
        shell.command("continue")
        shell.ack("w1", "1-1")
        shell.ack(ENGINE, "1-1")
        shell.advance(6.0)
        shell.heartbeat("w1")
        (answer,) = answers(shell.tick())
        assert answer.outcome.complete and answer.outcome.departed == ["w2"]

    def test_a_late_ack_is_counted_and_ignored(self) -> None:
        """An acknowledgement of a finished operation changes nothing but the counter."""
        shell = stack_with("w1")
        shell.command("pause", mode="abort", timeout_s=1.0)
        shell.advance(1.0)
        shell.tick()
        assert answers(shell.ack("w1", "1-1")) == []
        assert shell.core.counters.get("acks", "late") == 1


class TestInterleavedOperations:
    """Many operations in flight at once: each answered once, by its own acks."""

    def test_one_hundred_interleaved_operations(self) -> None:
        """100 pauses and continues, acks shuffled across them: every caller gets its own
        operation's answer exactly once, and the last operation sets the state."""
        participants = ("w1", "w2", "w3")
        shell = stack_with(*participants)
        started = []
        for number in range(100):
            name = "pause" if number % 2 == 0 else "continue"
            args = {"mode": "in_place"} if name == "pause" else {}
            handled = shell.command(name, **args)
            started.append(handled)
            assert handled.reply is DEFERRED
        op_ids = [f"1-{n}" for n in range(1, 101)]
        acks = [(who, op) for op in op_ids for who in (*participants, ENGINE)]
        random.Random(7).shuffle(acks)
        answered: dict[int, str] = {}
        for who, op_id in acks:
            for answer in answers(shell.ack(who, op_id)):
                assert answer.waiter.request_id not in answered
                answered[answer.waiter.request_id] = answer.outcome.op_id
                assert answer.outcome.complete
        assert answered == {n: f"1-{n}" for n in range(1, 101)}
        assert shell.core.pause.pending == []
        assert (shell.core.pause.state.paused, shell.core.pause.state.op_id) == (False, "1-100")
        assert len(shell.core.pause.recent) == 20
        for handled in started:  # the state is saved first, then announced
            assert isinstance(handled.effects[0], Persist)
            assert all(isinstance(send, Send) for send in handled.effects[1:])
