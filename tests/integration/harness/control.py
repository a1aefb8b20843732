"""Typed control calls for tests that think in command names and plain data.

:func:`ask` looks the command up among the router's command objects, converts the
keyword arguments to its struct (a bad one fails here, as ``switchboard ctl`` refuses
it), sends it with :meth:`ControlClient.request` and returns the reply as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from router_core.control import ControlClient, ControlCommand
from router_core.control.commands import TOKENIZER_ROUTER_COMMANDS

__all__ = ["ask"]


def ask(
    client: ControlClient,
    name: str,
    *,
    commands: Mapping[str, ControlCommand[Any, Any]] = TOKENIZER_ROUTER_COMMANDS,
    reply_timeout_s: float | None = None,
    **args: Any,
) -> Any:
    """Command ``name`` with ``args`` through ``client``; its reply as plain data."""
    command = commands[name]
    typed = msgspec.convert(args, command.args_type)
    reply = client.request(command, typed, reply_timeout_s=reply_timeout_s)
    return msgspec.to_builtins(reply)
