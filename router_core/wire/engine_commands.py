"""Operator commands the engine carries out, and its answers (``docs/protocol.md`` 3.11).

Every command the engine takes part in that is not part of the pause barrier travels
as one kind, ``ENGINE_COMMAND``, naming the command; the engine answers each with one
``COMMAND_REPLY`` carrying the same ``op_id``. A new command is then a new name, not a
new message kind: an engine that does not know a name answers ``ok: false`` with code
``unknown_command`` (the router's caller gets a clear error at once, not a timeout).
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

__all__ = ["REPLY_CODES", "CommandReply", "EngineCommand", "ReplyCode"]

#: Why an engine did not carry a command out: the request is refused in the engine's
#: current state (``conflict``: requests are running), its arguments are wrong
#: (``bad_arguments``: a file that is not there, a vocabulary that differs), it tried
#: and failed (``failed``), or it does not know the command (``unknown_command``).
ReplyCode = Literal["conflict", "bad_arguments", "failed", "unknown_command"]
REPLY_CODES: Final = ("conflict", "bad_arguments", "failed", "unknown_command")


class EngineCommand(msgspec.Struct, omit_defaults=True):
    """Router -> engine: run ``command`` with ``args`` (a map, the command's own fields)
    and answer ``op_id`` with a :class:`CommandReply`."""

    op_id: str
    command: str
    args: dict[str, Any] = {}


class CommandReply(msgspec.Struct, omit_defaults=True):
    """Engine -> router: how ``op_id`` ended. ``ok``: done, ``result`` its figures (the
    command's reply fields); else ``code`` and ``message`` (one sentence naming what was
    wrong). ``secret`` is the stack key, as on every engine event."""

    op_id: str
    ok: bool
    code: ReplyCode | None = None
    message: str = ""
    result: dict[str, Any] = {}
    secret: str = ""
