"""The engine link's input gate: operations in (incarnation, seq) order, re-sent
requests that are still open dropped, finished requests forgotten."""

from __future__ import annotations

import pytest

from router_core.engine_link.gate import InputGate
from router_core.engine_link.inputs import Command, Request
from router_core.wire import Kind
from router_core.wire.control import ContinueRequest, FreezeGC, PauseRequest
from router_core.wire.requests import GenerateRequest


def generate(rid: str, owner: str = "w0") -> Request:
    return Request(
        kind=Kind.GENERATE, payload=GenerateRequest(rid=rid, input_ids=[1]), rid=rid, reply_to=owner
    )


def pause(op_id: str) -> Command:
    return Command(kind=Kind.PAUSE, payload=PauseRequest(op_id, "in_place"))


class TestOperations:
    def test_newer_operations_pass_older_and_equal_ones_do_not(self) -> None:
        gate = InputGate()
        assert gate.screen(pause("5-3")) is None
        assert gate.screen(pause("5-3")) == "operation"  # the same one again
        assert gate.screen(pause("5-2")) == "operation"  # an older one, late
        assert gate.screen(Command(kind=Kind.CONTINUE, payload=ContinueRequest("5-4"))) is None

    def test_a_new_router_incarnation_wins_with_a_lower_sequence(self) -> None:
        gate = InputGate()
        assert gate.screen(pause("5-900")) is None
        assert gate.screen(pause("6-1")) is None
        assert gate.screen(pause("5-901")) == "operation"

    def test_ids_without_an_order_always_pass(self) -> None:
        """An engine driven by hand (``op-1``) is never second-guessed."""
        gate = InputGate()
        assert gate.screen(pause("op-1")) is None
        assert gate.screen(pause("op-1")) is None

    def test_other_commands_pass(self) -> None:
        assert InputGate().screen(Command(kind=Kind.FREEZE_GC, payload=FreezeGC())) is None


class TestRequests:
    def test_a_copy_of_an_open_request_is_a_duplicate(self) -> None:
        gate = InputGate()
        assert gate.screen(generate("r1")) is None
        assert gate.screen(generate("r1")) == "request"
        assert gate.screen(generate("r1", owner="w1")) is None  # another worker's rid

    def test_a_finished_request_may_be_sent_again(self) -> None:
        """A rid reused after its request finished is a new request."""
        gate = InputGate()
        gate.screen(generate("r1"))
        gate.finished(["r1", "r2"], ["w0", "w0"], [{"type": "length"}, None])
        assert gate.screen(generate("r1")) is None
        assert len(gate) == 1

    def test_the_open_set_is_bounded(self) -> None:
        gate = InputGate(max_open=4)
        for index in range(20):
            gate.screen(generate(f"r{index}"))
        assert len(gate) == 4

    def test_refuses_a_zero_bound(self) -> None:
        with pytest.raises(ValueError):
            InputGate(max_open=0)
