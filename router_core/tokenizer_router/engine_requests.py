"""Operator commands the engine carries out: each sent once, answered once, bounded.

:meth:`EngineRequests.start` sends the engine one ``ENGINE_COMMAND`` and keeps the
caller's reply address under a fresh op id until the engine's ``COMMAND_REPLY`` for it
(:meth:`on_reply`), its deadline (:meth:`expire`), or an engine restart
(:meth:`engine_restarted`: the new engine never heard of it) — whichever comes first
answers the caller, exactly once. An engine's ``ok`` reply becomes the command's reply
struct; a refusal becomes the control error its code names, the engine's sentence kept.
Pure: no sockets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from router_core.control.command_model import ControlCommand
from router_core.control.protocol import ErrorCode
from router_core.control.table import ReplyTo
from router_core.counters import Counters
from router_core.tokenizer_router.effects import Answer, Effect, Fail, Instant, Send
from router_core.wire import Kind, frame_message
from router_core.wire.control import ENGINE
from router_core.wire.engine_commands import CommandReply, EngineCommand, ReplyCode

__all__ = ["DEFAULT_ENGINE_COMMAND_TIMEOUT_S", "EngineRequests", "Then"]

#: Seconds the engine gets to answer a command whose arguments name no ``timeout_s``.
DEFAULT_ENGINE_COMMAND_TIMEOUT_S: Final = 30.0

#: The control error each refusal code of an engine becomes.
_CODES: Final[dict[ReplyCode, ErrorCode]] = {
    "conflict": ErrorCode.CONFLICT,
    "bad_arguments": ErrorCode.BAD_ARGUMENTS,
    "failed": ErrorCode.ENGINE_FAILED,
    "unknown_command": ErrorCode.ENGINE_FAILED,
}


#: An internal caller's continuation: ``then(reply, problem, at)`` with the engine's
#: reply, or None and why there is none (a timeout, a restart); its effects.
Then = Callable[[CommandReply | None, str, Instant], list[Effect]]


@dataclass(frozen=True, slots=True)
class _Pending:
    command: ControlCommand[Any, Any]
    waiter: ReplyTo | Then
    deadline: float
    waited_s: float


class EngineRequests:
    """The engine commands sent and not yet answered, by op id (``e<incarnation>-<n>``:
    never the shape of a barrier's op id, so neither is taken for the other)."""

    def __init__(self, incarnation: int, counters: Counters) -> None:
        self._prefix = f"e{incarnation}-"
        self._numbers = itertools.count(1)
        self._counters = counters
        self._pending: dict[str, _Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def start(
        self,
        command: ControlCommand[Any, Any],
        args: msgspec.Struct,
        waiter: ReplyTo | Then,
        at: Instant,
    ) -> list[Effect]:
        """Send ``command`` with ``args`` to the engine; ``waiter`` is answered later (a
        control request's reply address, or an internal continuation, :data:`Then`). The
        engine gets ``args.timeout_s`` seconds, if the command has one."""
        op_id = f"{self._prefix}{next(self._numbers)}"
        waited_s = getattr(args, "timeout_s", None) or DEFAULT_ENGINE_COMMAND_TIMEOUT_S
        self._pending[op_id] = _Pending(command, waiter, at.mono + waited_s, waited_s)
        payload = EngineCommand(op_id=op_id, command=command.name, args=msgspec.to_builtins(args))
        message = frame_message(Kind.ENGINE_COMMAND, payload)
        return [Send(ENGINE, message, counter=("engine_commands", command.name, 1))]

    def on_reply(self, reply: CommandReply, at: Instant) -> list[Effect]:
        """The engine's answer to one command: its caller's answer (none for an op id
        that is not waiting: answered already, timed out, or of an older router)."""
        pending = self._pending.pop(reply.op_id, None)
        if pending is None:
            self._counters.add("rejected", "stale_command_reply")
            return []
        name = pending.command.name
        if not isinstance(pending.waiter, ReplyTo):
            self._counters.add("engine_command_results", f"{name}:{reply.code or 'ok'}")
            return pending.waiter(reply, "", at)
        if not reply.ok:
            self._counters.add("engine_command_results", f"{name}:{reply.code or 'failed'}")
            code = _CODES.get(reply.code or "failed", ErrorCode.ENGINE_FAILED)
            message = reply.message or f"the engine did not {name} (it gave no reason)"
            return [Fail(pending.waiter, code, f"{name}: {message}")]
        try:
            outcome = msgspec.convert(reply.result, pending.command.reply_type)
        except msgspec.ValidationError as exc:
            self._counters.add("engine_command_results", f"{name}:bad_reply")
            message = f"{name}: the engine's answer is not what it should be ({exc})"
            return [Fail(pending.waiter, ErrorCode.ENGINE_FAILED, message)]
        self._counters.add("engine_command_results", f"{name}:ok")
        return [Answer(pending.waiter, outcome)]

    def expire(self, at: Instant) -> list[Effect]:
        """Answer every command whose deadline passed: the engine did not answer."""
        late = [op_id for op_id, each in self._pending.items() if at.mono >= each.deadline]
        effects: list[Effect] = []
        for op_id in late:
            pending = self._pending.pop(op_id)
            name = pending.command.name
            self._counters.add("engine_command_results", f"{name}:timeout")
            message = f"the engine did not answer within {pending.waited_s:g} s"
            effects += self._fail(pending, ErrorCode.ENGINE_TIMEOUT, message, at)
        return effects

    def engine_restarted(self, at: Instant) -> list[Effect]:
        """Answer every command in flight: the engine that had them is gone."""
        effects: list[Effect] = []
        pending, self._pending = list(self._pending.values()), {}
        for each in pending:
            self._counters.add("engine_command_results", f"{each.command.name}:engine_restarted")
            message = "the engine restarted before it answered; ask again"
            effects += self._fail(each, ErrorCode.ENGINE_FAILED, message, at)
        return effects

    @staticmethod
    def _fail(pending: _Pending, code: ErrorCode, message: str, at: Instant) -> list[Effect]:
        if isinstance(pending.waiter, ReplyTo):
            return [Fail(pending.waiter, code, f"{pending.command.name}: {message}")]
        return pending.waiter(None, message, at)

    def next_deadline(self) -> float | None:
        """The earliest deadline (monotonic), or None with nothing waiting."""
        return min((each.deadline for each in self._pending.values()), default=None)
