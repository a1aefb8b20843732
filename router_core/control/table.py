"""A control server's table: the handler bound to each command, where its reply goes,
and how a mutation names itself in audit lines. Pure: no sockets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import msgspec

from router_core.control.command_model import ControlCommand

__all__ = ["DEFERRED", "AuditedCall", "Command", "ReplyTo"]

StateT = TypeVar("StateT")


@dataclass(frozen=True)
class AuditedCall:
    """A mutation being run, as its audit lines name it: who asked (their own claim),
    the command and its arguments in one short text."""

    actor: str
    command: str
    args: str


@dataclass(frozen=True)
class ReplyTo:
    """Where a reply goes: the ROUTER envelope and the request id; ``audited`` when the
    request is a mutation whose answer is audited too (a barrier answered later)."""

    envelope: tuple[bytes, ...]
    request_id: int
    audited: AuditedCall | None = None


#: Returned by a handler that will answer later (a barrier waiting for acknowledgements).
DEFERRED: Final = object()


@dataclass(frozen=True)
class Command(Generic[StateT]):
    """A server's table entry: the handler for one command, its argument struct, a summary.

    ``handler(state, args, reply_to)`` returns the result, or :data:`DEFERRED`;
    ``mutates`` as in :class:`~router_core.control.command_model.ControlCommand`.
    """

    handler: Callable[[StateT, Any, ReplyTo], Any]
    args_type: type[msgspec.Struct]
    summary: str
    mutates: bool = False

    @classmethod
    def serving(
        cls, command: ControlCommand[Any, Any], handler: Callable[[StateT, Any, ReplyTo], Any]
    ) -> Command[StateT]:
        """The entry that serves ``command`` with ``handler``."""
        return cls(handler, command.args_type, command.summary, command.mutates)
