"""Pure judgements engine-check makes: load snapshots, acknowledgements, command replies,
op ids, and the stop conditions it derives from an engine's own first output.

No sockets, no clock: each function takes what was received and returns the problems
it shows as ``(seen, fix)`` pairs (empty: conforms), or the value it derives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from router_core.credentials import matches
from router_core.wire.control import ENGINE, Acknowledgement, LoadSnapshot
from router_core.wire.engine_commands import CommandReply
from switchboard.engine_check.rows import RequestRun

__all__ = [
    "MAX_SANE_RUNNING",
    "RACE_S",
    "REPLY_FIX",
    "Problem",
    "ack_problems",
    "conflict_problems",
    "echoes_prompt",
    "ended_before",
    "flushed_problems",
    "interval_problems",
    "load_problems",
    "op_id",
    "pick_stop_id",
    "pick_stop_string",
    "reply_problems",
    "reply_text",
    "unknown_command_problems",
]

#: ``(what was seen, the fix)``.
Problem = tuple[str, str]

#: Seconds after a command was sent in which a request may still finish on its own.
RACE_S: Final = 0.05
#: A ``max_running`` above this is no real limit (a sign of an unset or garbage field).
MAX_SANE_RUNNING: Final = 1_000_000


def op_id(incarnation: int, seq: int) -> str:
    """A pause/continue operation id as routers make them: ``<incarnation>-<seq>``."""
    return f"{incarnation}-{seq}"


def load_problems(snapshot: LoadSnapshot, key: str) -> list[Problem]:
    """What is wrong with a first ``LOAD``: the key, ``engine_started_ns``, ``max_running``."""
    found: list[Problem] = []
    if not matches(snapshot.secret, key):
        seen = "no secret" if not snapshot.secret else "a secret that is not the stack key"
        found.append(
            (
                f"LOAD carries {seen}",
                "put the stack key (SWITCHBOARD_STACK_KEY, or the first line of the key "
                "file) in every LOAD's secret (protocol.md 3.5, 5.14)",
            )
        )
    if snapshot.engine_started_ns <= 0:
        found.append(
            (
                f"engine_started_ns is {snapshot.engine_started_ns}",
                "set LOAD.engine_started_ns to this process's start, Unix ns, the same in "
                "every snapshot (protocol.md 3.5, 5.11)",
            )
        )
    if not 0 < snapshot.max_running <= MAX_SANE_RUNNING:
        found.append(
            (
                f"max_running is {snapshot.max_running}",
                "set LOAD.max_running to the engine's limit on running requests, "
                f"1..{MAX_SANE_RUNNING} (protocol.md 3.5)",
            )
        )
    return found


def interval_problems(first: LoadSnapshot, second: LoadSnapshot) -> list[Problem]:
    """What is wrong with a second ``LOAD`` after ``first`` of the same incarnation."""
    found: list[Problem] = []
    fix = "take step and taken_ns from one clock that never goes back (protocol.md 3.5)"
    if second.step < first.step:
        found.append((f"step went back from {first.step} to {second.step}", fix))
    if second.taken_ns < first.taken_ns:
        found.append((f"taken_ns went back by {first.taken_ns - second.taken_ns} ns", fix))
    if second.engine_started_ns != first.engine_started_ns:
        found.append(
            (
                f"engine_started_ns changed from {first.engine_started_ns} to "
                f"{second.engine_started_ns} within one process",
                "keep engine_started_ns the same in every LOAD of one incarnation "
                "(protocol.md 3.5, 8)",
            )
        )
    return found


def ack_problems(ack: Acknowledgement, key: str) -> list[Problem]:
    """What is wrong with an engine's ``ACK`` (its ``op_id`` already matched)."""
    found: list[Problem] = []
    if ack.participant != ENGINE:
        found.append(
            (
                f"ACK names participant {ack.participant!r}",
                'name participant "engine" in every ACK on events (protocol.md 3.4, 5.7)',
            )
        )
    if not matches(ack.secret, key):
        seen = "no secret" if not ack.secret else "a secret that is not the stack key"
        found.append(
            (
                f"ACK carries {seen}",
                "put the stack key in every ACK's secret (protocol.md 3.4, 5.14)",
            )
        )
    return found


#: The fix of an engine command not answered as it must be.
REPLY_FIX: Final = (
    "answer every ENGINE_COMMAND at once with exactly one COMMAND_REPLY {op_id, ok, code, "
    "message, result, secret: key} on events, a name you do not carry out with code "
    "unknown_command (protocol.md 3.11)"
)
_CONFLICT_FIX: Final = (
    'refuse flush_cache with code "conflict" and a message naming the running requests '
    "while any request runs and generation is not paused (protocol.md 3.11)"
)


def reply_text(reply: CommandReply) -> str:
    """A reply as the operator reads it: ``ok {result}``, or ``code: message``."""
    return f"ok {reply.result}" if reply.ok else f"{reply.code}: {reply.message}"


def reply_problems(command: str, replies: Sequence[CommandReply], key: str) -> list[Problem]:
    """What is wrong with the replies to one engine command (at least one came): more
    than one, or the first without the key."""
    found: list[Problem] = []
    if len(replies) > 1:
        found.append((f"{command} answered {len(replies)} times", REPLY_FIX))
    if not matches(replies[0].secret, key):
        seen = "no secret" if not replies[0].secret else "a secret that is not the stack key"
        found.append(
            (
                f"COMMAND_REPLY carries {seen}",
                "put the stack key in every COMMAND_REPLY's secret (protocol.md 3.11, 5.14)",
            )
        )
    return found


def flushed_problems(reply: CommandReply) -> list[Problem]:
    """What is wrong with the reply to ``flush_cache`` sent while no request runs."""
    dropped = reply.result.get("dropped_tokens")
    flushed = reply.result.get("flushed") is True
    if reply.ok and flushed and isinstance(dropped, int) and dropped >= 0:
        return []
    return [
        (
            f"flush_cache with no request running: {reply_text(reply)}",
            'answer flush_cache with ok and result {"flushed": true, "dropped_tokens": N} '
            "(0 for an engine without a cache) while no request runs (protocol.md 3.11)",
        )
    ]


def unknown_command_problems(command: str, reply: CommandReply) -> list[Problem]:
    """What is wrong with the reply to a command name no engine carries out."""
    if not reply.ok and reply.code == "unknown_command":
        return []
    return [(f"the unknown command {command!r}: {reply_text(reply)}", REPLY_FIX)]


def conflict_problems(reply: CommandReply, sent_ns: int, run: RequestRun) -> list[Problem] | None:
    """What is wrong with the reply to ``flush_cache`` sent while ``run`` ran unpaused
    (``sent_ns``: the reply's header stamp, the engine's clock); None when ``ok`` tells
    nothing: the request ended on its own before the reply was framed (or, unstamped,
    before it arrived)."""
    if not reply.ok:
        if reply.code == "conflict" and run.rid in reply.message:
            return []
        return [(f"flush_cache while {run.rid} ran: {reply_text(reply)}", _CONFLICT_FIX)]
    ended_alone = run.finished and run.finish_type != "abort"
    stamped = sent_ns > 0 and run.finish_sent_ns > 0
    if ended_alone and (not stamped or run.finish_sent_ns <= sent_ns):
        return None
    return [(f"flush_cache while {run.rid} ran: {reply_text(reply)}", _CONFLICT_FIX)]


def ended_before(run: RequestRun, sent_ns: int) -> bool:
    """Whether ``run`` ended on its own (not aborted) in a message the engine framed
    before a command sent at ``sent_ns`` (wall clock) could have reached it, within
    :data:`RACE_S`: an engine reads commands between steps. Such a finish says nothing
    of how the command was applied. A message without ``sent_ns`` (0) is judged."""
    ended_alone = run.finished and run.finish_type != "abort"
    return ended_alone and 0 < run.finish_sent_ns < sent_ns + int(RACE_S * 1e9)


def echoes_prompt(prompt: Sequence[int], ids: Sequence[int]) -> bool:
    """Whether ``ids`` are the prompt's ids again, in order (cycled): an echo engine."""
    return (
        bool(prompt)
        and bool(ids)
        and all(token == prompt[index % len(prompt)] for index, token in enumerate(ids))
    )


def pick_stop_id(ids: Sequence[int], start: int = 2) -> tuple[int, int] | None:
    """``(k, ids[k])`` for the first ``k >= start`` whose id does not occur before it, so
    a run with that stop id must end after exactly ``k + 1`` ids; None if there is none
    before the last id (which would end by length anyway)."""
    for index in range(start, len(ids) - 1):
        if ids[index] not in ids[:index]:
            return index, ids[index]
    return None


def pick_stop_string(
    ids: Sequence[int], decode: Callable[[Sequence[int]], str], start: int = 2
) -> tuple[int, str] | None:
    """``(k, s)``: ``s`` is the text id ``k`` adds (stripped), for the first ``k >= start``
    where that text is whole (no U+FFFD), not empty, and not already in the text before,
    so a run with stop string ``s`` must end after exactly ``k + 1`` ids."""
    for index in range(start, len(ids) - 1):
        before, through = decode(ids[:index]), decode(ids[: index + 1])
        if not through.startswith(before):
            continue
        piece = through[len(before) :].strip()
        if piece and "\ufffd" not in through and piece not in before:
            # The piece must not be completed by an earlier id either: the text through
            # each earlier id is a prefix of ``before``, so "not in before" covers it.
            return index, piece
    return None
