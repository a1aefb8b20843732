"""The duty of operator commands (``docs/protocol.md`` 3.11): every ``ENGINE_COMMAND``
answered once, at once, with a ``COMMAND_REPLY`` carrying the key; ``flush_cache`` done
while idle and refused (``conflict``, naming them) while requests run unpaused; a name
the engine does not carry out answered ``unknown_command``.

:func:`check_commands` takes the :class:`~switchboard.engine_check.session.Session` and
returns the row's finding; the judgements are :mod:`~switchboard.engine_check.verdicts`'.
A request that must still run when ``flush_cache`` arrives and ends first makes long
requests longer (:meth:`Session.lengthen`) and it is tried again; if it still ends
first, that part is not checked (the detail says so), never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec

from router_core.control.commands import FLUSH_CACHE
from router_core.wire import Kind
from router_core.wire.engine_commands import CommandReply, EngineCommand
from switchboard.engine_check.checks import verdict
from switchboard.engine_check.findings import Finding
from switchboard.engine_check.session import TOO_FAST, Session
from switchboard.engine_check.verdicts import (
    REPLY_FIX,
    Problem,
    conflict_problems,
    flushed_problems,
    reply_problems,
    reply_text,
    unknown_command_problems,
)

__all__ = ["REPLY_GRACE_S", "UNKNOWN_COMMAND", "Answer", "ask", "check_commands"]

NAME: Final = "engine_command"
#: A command name no engine carries out.
UNKNOWN_COMMAND: Final = "engine_check_no_such_command"
#: Seconds after a reply in which a second one, or rows sent before it (another socket),
#: may still arrive.
REPLY_GRACE_S: Final = 0.1


@dataclass(frozen=True)
class Answer:
    """An engine command's first reply, and its header ``sent_ns`` (the engine's clock,
    0: unstamped)."""

    reply: CommandReply
    sent_ns: int


def ask(
    session: Session, command: str, args: dict[str, Any]
) -> tuple[Answer | None, list[Problem]]:
    """Send ``ENGINE_COMMAND`` ``command`` with ``args`` and wait for its reply: the reply
    (None if none came within the bound) and what was wrong with how it was answered."""
    harness = session.harness
    op = session.next_command_op()
    since = len(harness.inbox.events)
    harness.send(Kind.ENGINE_COMMAND, EngineCommand(op_id=op, command=command, args=args))
    if not harness.wait(lambda: bool(harness.replies(op, since)), session.timeout_s):
        bound = f"{session.timeout_s:g} s"
        return None, [(f"no COMMAND_REPLY for {command} {op} within {bound}", REPLY_FIX)]
    harness.pump(REPLY_GRACE_S)  # a second reply would be a breach too
    replies = harness.replies(op, since)
    problems = reply_problems(f"{command} {op}", [reply for reply, _ in replies], session.key)
    return Answer(*replies[0]), problems


def _flush_args(session: Session) -> dict[str, Any]:
    """``flush_cache``'s arguments as the router sends them."""
    args: dict[str, Any] = msgspec.to_builtins(
        FLUSH_CACHE.args_type(timeout_s=min(session.timeout_s, 600.0))
    )
    return args


def _while_running(session: Session) -> tuple[str, list[Problem]]:
    """``flush_cache`` while a request runs unpaused: what was seen, and what was wrong."""
    for _ in range(2):
        rids = session.start_long("flush", 1)
        if isinstance(rids, str):
            return f"while a request ran: not checked ({rids})", []
        answer, problems = ask(session, FLUSH_CACHE.name, _flush_args(session))
        run = session.runs(rids)[0]
        if not run.finished:
            session.abort(run.rid)
        session.wait_finished(rids)  # bounded; the engine is left idle for what follows
        if answer is None:
            return "while a request ran: no reply", problems
        found = conflict_problems(answer.reply, answer.sent_ns, run)
        if found is not None:
            return f"while {run.rid} ran: {answer.reply.code or 'ok'}", problems + found
        if not session.lengthen():
            break
    return f"while a request ran: not checked ({TOO_FAST})", []


def check_commands(session: Session) -> list[Finding]:
    """``engine_command``: ``flush_cache`` idle (ok), an unknown name (``unknown_command``),
    ``flush_cache`` while a request runs (``conflict`` naming it)."""
    session.abort(None)  # nothing of earlier checks may still run
    session.harness.pump(REPLY_GRACE_S)
    idle, problems = ask(session, FLUSH_CACHE.name, _flush_args(session))
    if idle is None:
        return [verdict(NAME, problems, "")]  # no reply: the rest would say no more
    problems += flushed_problems(idle.reply)
    unknown, found = ask(session, UNKNOWN_COMMAND, {})
    problems += found
    if unknown is not None:
        problems += unknown_command_problems(UNKNOWN_COMMAND, unknown.reply)
    running, found = _while_running(session)
    problems += found
    named = unknown.reply.code if unknown is not None else "no reply"
    detail = f"flush_cache idle: {reply_text(idle.reply)}; unknown name: {named}; {running}"
    return [verdict(NAME, problems, detail)]
