"""engine-check's judgements of an engine's answers to operator commands (protocol.md 3.11)."""

from __future__ import annotations

from router_core.wire.engine_commands import CommandReply, ReplyCode
from switchboard.engine_check.rows import RequestRun
from switchboard.engine_check.verdicts import (
    conflict_problems,
    flushed_problems,
    reply_problems,
    unknown_command_problems,
)

KEY = "k" * 64
REPLY_NS = 1_000_000_000_000
FLUSHED = CommandReply(
    op_id="e1-1", ok=True, result={"flushed": True, "dropped_tokens": 0}, secret=KEY
)


def refused(code: ReplyCode, message: str = "") -> CommandReply:
    """A refusal with ``code`` and ``message``."""
    return CommandReply(op_id="e1-1", ok=False, code=code, message=message, secret=KEY)


def running(rid: str = "r1") -> RequestRun:
    """A run still going when the reply came."""
    return RequestRun(rid, rows=3)


def ended(kind: str, sent_ns: int, rid: str = "r1") -> RequestRun:
    """A run finished with ``kind`` in a message the engine framed at ``sent_ns``."""
    return RequestRun(rid, rows=3, finish={"type": kind}, finish_sent_ns=sent_ns)


class TestReplies:
    """reply_problems: once, with the key."""

    def test_one_reply_with_the_key_conforms(self) -> None:
        """A single reply carrying the stack key is fine."""
        assert reply_problems("flush_cache e1-1", [FLUSHED], KEY) == []

    def test_twice_or_without_the_key(self) -> None:
        """A second reply, or a reply without the key, is a problem each."""
        assert "answered 2 times" in reply_problems("x", [FLUSHED, FLUSHED], KEY)[0][0]
        keyless = CommandReply(op_id="e1-1", ok=True)
        assert "no secret" in reply_problems("x", [keyless], KEY)[0][0]


class TestFlushIdle:
    """flushed_problems: ok with the result's fields while nothing runs."""

    def test_ok_with_the_result(self) -> None:
        """ok, flushed true and an int dropped_tokens conform."""
        assert flushed_problems(FLUSHED) == []

    def test_refused_or_without_figures(self) -> None:
        """A refusal, or ok without the result's fields, does not."""
        assert flushed_problems(refused("conflict", "busy"))[0][0].endswith("conflict: busy")
        assert flushed_problems(CommandReply(op_id="e1-1", ok=True, secret=KEY))


class TestUnknownCommand:
    """unknown_command_problems: code unknown_command, nothing else."""

    def test_unknown_command_conforms(self) -> None:
        """The code unknown_command is the answer."""
        assert unknown_command_problems("nope", refused("unknown_command", "no")) == []

    def test_ok_or_another_code(self) -> None:
        """ok, or another code, is a problem."""
        assert unknown_command_problems("nope", FLUSHED)
        assert unknown_command_problems("nope", refused("failed", "no"))


class TestFlushWhileRunning:
    """conflict_problems: conflict naming the request, or a finish that tells nothing."""

    def test_conflict_naming_the_request(self) -> None:
        """conflict whose message names the rid conforms."""
        reply = refused("conflict", "1 requests are running (r1)")
        assert conflict_problems(reply, REPLY_NS, running()) == []

    def test_conflict_not_naming_it_or_another_code(self) -> None:
        """A conflict that does not name the rid, or another code, is a problem."""
        assert conflict_problems(refused("conflict", "busy"), REPLY_NS, running())
        assert conflict_problems(refused("failed", "r1"), REPLY_NS, running())

    def test_ok_while_it_ran(self) -> None:
        """ok while the request still ran, or ended after the reply, is a problem."""
        assert conflict_problems(FLUSHED, REPLY_NS, running())
        assert conflict_problems(FLUSHED, REPLY_NS, ended("length", REPLY_NS + 1))
        assert conflict_problems(FLUSHED, REPLY_NS, ended("abort", REPLY_NS - 1))

    def test_ok_after_it_ended_tells_nothing(self) -> None:
        """ok framed after the request's own finish, or unstamped after it, tells nothing."""
        assert conflict_problems(FLUSHED, REPLY_NS, ended("length", REPLY_NS - 1)) is None
        assert conflict_problems(FLUSHED, 0, ended("stop", REPLY_NS)) is None
