"""The built-in engine's operator commands: ``flush_cache`` refused while requests run
unpaused (naming them), done when paused or idle; and every engine command answered
once, a name it does not know or arguments that do not fit included."""

from __future__ import annotations

from typing import Any

import pytest

from router_core.control.command_args import FlushCacheArgs
from router_core.control.replies import FlushCacheReply
from router_core.engine_link.inputs import COMMAND_KINDS, ENGINE_COMMANDS, read_input
from router_core.wire import Kind, decode_header, frame_message
from router_core.wire.engine_commands import EngineCommand
from switchboard.engine.operator_commands import Refusal, carry_out, flush_cache
from switchboard.engine.scheduler import Scheduler, SchedulerConfig, Sequence


def scheduler_with(running: int) -> Scheduler:
    """A simulated scheduler with ``running`` requests admitted and stepped once."""
    scheduler = Scheduler(SchedulerConfig(token_pool=(5, 6, 7, 8), step_time_s=0.0))
    for index in range(running):
        scheduler.admit(Sequence(f"r{index}", "w0", [1, 2, 3], max_new_tokens=50))
    scheduler.step(0.0)
    return scheduler


class Answers:
    """Stands in for the link's one call an engine command makes: what was answered."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, Any, Any, str]] = []

    def answer_command(
        self, op_id: str, result: Any = None, *, code: Any = None, message: str = ""
    ) -> bool:
        self.answers.append((op_id, result, code, message))
        return True


def command(name: str, args: dict[str, Any]) -> Any:
    """An ENGINE_COMMAND as the engine link reads it off the wire."""
    frames = frame_message(
        Kind.ENGINE_COMMAND, EngineCommand(op_id="e1-1", command=name, args=args)
    )
    return read_input(decode_header(frames[0]), frames)


class TestFlushCache:
    def test_refused_while_requests_run_unpaused(self) -> None:
        scheduler = scheduler_with(3)
        with pytest.raises(Refusal) as refused:
            flush_cache(scheduler, FlushCacheArgs())
        assert refused.value.code == "conflict"
        assert "3 requests are running (r0, r1, r2)" in refused.value.message

    @pytest.mark.parametrize("mode", ["retract", "in_place", "abort"])
    def test_done_while_paused(self, mode: str) -> None:
        scheduler = scheduler_with(2)
        scheduler.pause(mode)
        assert flush_cache(scheduler, FlushCacheArgs()) == FlushCacheReply(dropped_tokens=0)

    def test_done_when_idle(self) -> None:
        assert flush_cache(scheduler_with(0), FlushCacheArgs()).flushed


class TestCarryOut:
    def test_the_link_types_the_arguments(self) -> None:
        """ENGINE_COMMAND is a command kind, its arguments typed by the command's struct."""
        assert Kind.ENGINE_COMMAND in COMMAND_KINDS and "flush_cache" in ENGINE_COMMANDS
        assert command("flush_cache", {"timeout_s": 3}).args == FlushCacheArgs(timeout_s=3.0)

    def test_answered_with_the_reply(self) -> None:
        link = Answers()
        carry_out(link, scheduler_with(0), command("flush_cache", {}))  # type: ignore[arg-type]
        assert link.answers == [("e1-1", FlushCacheReply(dropped_tokens=0), None, "")]

    def test_a_refusal_is_answered(self) -> None:
        link = Answers()
        carry_out(link, scheduler_with(1), command("flush_cache", {}))  # type: ignore[arg-type]
        ((_, result, code, message),) = link.answers
        assert (result, code) == (None, "conflict") and "r0" in message

    def test_an_unknown_name_is_answered(self) -> None:
        link = Answers()
        carry_out(link, scheduler_with(0), command("reboot", {}))  # type: ignore[arg-type]
        ((_, _, code, message),) = link.answers
        assert code == "unknown_command" and "'reboot'" in message

    def test_bad_arguments_are_answered(self) -> None:
        link = Answers()
        carry_out(link, scheduler_with(0), command("flush_cache", {"timeout_s": -1}))  # type: ignore[arg-type]
        ((_, _, code, message),) = link.answers
        assert code == "bad_arguments" and "timeout_s" in message
