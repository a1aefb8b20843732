"""Operator commands over the admin app's HTTP API: one ``switchboard`` subcommand per
entry of the command catalogue (:mod:`app.catalogue`) that has a CLI name: ``status``,
``workers``, ``pause``, ``continue``, ``drain``, ``undrain``, ``load`` and ``freeze-gc``.

:mod:`switchboard.cli` calls :func:`add_parsers` for every command line and :func:`run`
for the commands in :data:`COMMAND_NAMES`. Importing this package costs only argparse
and the catalogue (plain data): every ``switchboard`` process builds the parser, and
only these commands need httpx.
"""

from __future__ import annotations

import argparse

from switchboard.admin_cli.parsers import (
    BARRIER_GRACE_S,
    CLI_COMMANDS,
    COMMAND_NAMES,
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_HTTP_TIMEOUT_S,
    DEFAULT_URL,
    EPILOG,
    add_parsers,
)

__all__ = [
    "BARRIER_GRACE_S",
    "CLI_COMMANDS",
    "COMMAND_NAMES",
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_HTTP_TIMEOUT_S",
    "DEFAULT_URL",
    "EPILOG",
    "add_parsers",
    "run",
]


def run(args: argparse.Namespace) -> int:
    """Run one operator command; its exit status (see :data:`EPILOG`)."""
    from switchboard.admin_cli.commands import execute

    return execute(args)
