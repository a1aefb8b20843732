"""Engine commands through the router's core (``flush_cache``): sent once to the engine,
answered exactly once — by the engine's reply, its deadline or its restart — and a
reply nobody waits for is counted, never answered twice. No sockets, no sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.replies import FlushCacheReply
from router_core.control.table import DEFERRED
from router_core.tokenizer_router.effects import Answer, Effect, Fail
from router_core.wire import Kind, decode_header
from router_core.wire.engine_commands import CommandReply, EngineCommand
from tests.unit.router_core.tokenizer_router.shell import KEY, CoreShell, payload_of, sends


def fails(effects: list[Effect]) -> list[Fail]:
    return [effect for effect in effects if isinstance(effect, Fail)]


def started(shell: CoreShell, **args: Any) -> EngineCommand:
    """``flush_cache`` run with a live engine: the one message the engine was sent."""
    handled = shell.command("flush_cache", **args)
    assert handled.reply is DEFERRED
    (send,) = sends(handled.effects)
    assert send.to == "engine"
    assert decode_header(send.frames[0]).kind is Kind.ENGINE_COMMAND
    command: EngineCommand = payload_of(send, EngineCommand)
    assert command.command == "flush_cache"
    return command


def reply(shell: CoreShell, **fields: Any) -> list[Effect]:
    fields.setdefault("secret", KEY)
    return shell.deliver(shell.core.engine_events, Kind.COMMAND_REPLY, CommandReply(**fields))


@pytest.fixture
def shell() -> CoreShell:
    live = CoreShell(key=KEY)
    live.engine_load(engine_started_ns=1)
    return live


class TestFlushCache:
    def test_the_engines_answer_is_the_reply(self, shell: CoreShell) -> None:
        """ok with figures: one Answer carrying the command's reply struct."""
        command = started(shell)
        assert command.args == {"timeout_s": 10.0}
        effects = reply(shell, op_id=command.op_id, ok=True, result={"dropped_tokens": 12})
        (answer,) = [effect for effect in effects if isinstance(effect, Answer)]
        assert answer.outcome == FlushCacheReply(flushed=True, dropped_tokens=12)
        assert shell.core.counters.get("engine_command_results", "flush_cache:ok") == 1

    def test_a_refusal_keeps_the_engines_sentence(self, shell: CoreShell) -> None:
        """conflict is CONFLICT (the API's 409), the engine's message named."""
        command = started(shell)
        message = "2 requests are running (a, b); pause generation or let them finish first"
        (fail,) = fails(
            reply(shell, op_id=command.op_id, ok=False, code="conflict", message=message)
        )
        assert fail.code is ErrorCode.CONFLICT
        assert fail.message == f"flush_cache: {message}"

    @pytest.mark.parametrize(
        ("code", "expected"),
        [
            ("bad_arguments", ErrorCode.BAD_ARGUMENTS),
            ("failed", ErrorCode.ENGINE_FAILED),
            ("unknown_command", ErrorCode.ENGINE_FAILED),
        ],
    )
    def test_each_code_maps(self, shell: CoreShell, code: str, expected: ErrorCode) -> None:
        command = started(shell)
        (fail,) = fails(reply(shell, op_id=command.op_id, ok=False, code=code, message="why"))
        assert fail.code is expected

    def test_a_reply_of_the_wrong_shape_is_an_engine_failure(self, shell: CoreShell) -> None:
        command = started(shell)
        effects = reply(shell, op_id=command.op_id, ok=True, result={"dropped_tokens": "many"})
        (fail,) = fails(effects)
        assert fail.code is ErrorCode.ENGINE_FAILED and "not what it should be" in fail.message

    def test_answered_once_then_a_second_reply_is_counted(self, shell: CoreShell) -> None:
        command = started(shell)
        assert reply(shell, op_id=command.op_id, ok=True)
        assert reply(shell, op_id=command.op_id, ok=True) == []
        assert shell.core.counters.get("rejected", "stale_command_reply") == 1

    def test_the_deadline_answers_a_silent_engine(self, shell: CoreShell) -> None:
        """No reply within timeout_s: ENGINE_TIMEOUT (the API's 504), then nothing more."""
        command = started(shell, timeout_s=2.0)
        assert shell.core.next_due() <= shell.at.mono + 2.0
        shell.advance(1.9)
        assert fails(shell.tick()) == []
        shell.advance(0.2)
        (fail,) = fails(shell.tick())
        assert fail.code is ErrorCode.ENGINE_TIMEOUT
        assert fail.message == "flush_cache: the engine did not answer within 2 s"
        assert reply(shell, op_id=command.op_id, ok=True) == []

    def test_an_engine_restart_answers_what_it_held(self, shell: CoreShell) -> None:
        """A new engine incarnation never heard of the command: answered at once."""
        started(shell)
        (fail,) = fails(shell.engine_load(engine_started_ns=2))
        assert fail.code is ErrorCode.ENGINE_FAILED and "restarted" in fail.message
        assert len(shell.core.engine_requests) == 0

    def test_a_reply_without_the_key_is_refused(self, shell: CoreShell) -> None:
        """A forged reply cannot answer a waiting operator."""
        command = started(shell)
        effects = reply(shell, op_id=command.op_id, ok=True, secret="forged")
        assert [effect for effect in effects if isinstance(effect, Answer | Fail)] == []
        assert len(shell.core.engine_requests) == 1

    def test_no_live_engine_is_refused_at_once(self) -> None:
        """Without a live engine nothing is sent and the caller hears why now."""
        idle = CoreShell(key=KEY)
        with pytest.raises(ControlError) as caught:
            idle.command("flush_cache")
        assert caught.value.code is ErrorCode.ENGINE_FAILED

    def test_op_ids_are_never_barrier_ids(self, shell: CoreShell) -> None:
        """``e<incarnation>-<n>``: no barrier's ``<incarnation>-<seq>`` shape."""
        first, second = started(shell).op_id, started(shell).op_id
        assert first.startswith("e1-") and first != second
