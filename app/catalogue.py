"""The admin API's commands: the operator commands of :mod:`router_core.control.commands`.

Each is one :class:`~router_core.control.command_model.ControlCommand` there: its HTTP
method and path (and SGLang's alias paths), the role a token needs, whether it is
audited, its arguments (its struct's fields), a one-line summary, its CLI command (if
any) and its console control (if any). :mod:`app.routers` serves each one at its paths
behind its role (:func:`app.routers.binding.bind`, and :mod:`app.routers.operations`
for every command the router answers as it stands); :mod:`switchboard.admin_cli` builds
one subcommand per command with a CLI name; the console reads ``GET /api/commands``.

Pure data and free of HTTP imports: the CLI imports it without loading FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from router_core.control.command_model import Argument, ControlCommand, Role
from router_core.control.commands import OPERATOR_COMMANDS

__all__ = ["COMMANDS", "Argument", "Command", "Role", "by_cli_name", "command"]

#: One command of the admin API.
Command = ControlCommand[Any, Any]

#: Every command of the admin API, in the order the CLI's help lists them.
COMMANDS: Final[tuple[Command, ...]] = OPERATOR_COMMANDS

_BY_NAME: Final[Mapping[str, Command]] = {entry.name: entry for entry in COMMANDS}


def command(name: str) -> Command:
    """The command ``name``; KeyError for a name the admin API does not have."""
    return _BY_NAME[name]


def by_cli_name() -> dict[str, Command]:
    """``{CLI name: command}`` of every command the CLI offers, in catalogue order."""
    return {entry.cli.name: entry for entry in COMMANDS if entry.cli is not None}
