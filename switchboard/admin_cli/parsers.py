"""The operator commands' command line: one subcommand per catalogue entry with a CLI
name, its arguments as options, and the connection flags every command takes.

Costs only argparse and the catalogue (plain data) to import: every ``switchboard``
process builds the parser.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

from app.catalogue import COMMANDS, Argument, Command, by_cli_name
from router_core.limits import DEFAULT_BARRIER_TIMEOUT_S
from switchboard.admin_cli.arguments import (
    DEFAULT_URL,
    MAX_BARRIER_TIMEOUT_S,
    TOKEN_ENV,
    URL_ENV,
    barrier_timeout,
    http_timeout,
    token,
    url,
    wait_seconds,
    watch_interval,
    worker_id,
)
from switchboard.admin_cli.drain_wait import DEFAULT_WAIT_S
from switchboard.argtypes import finite_float

__all__ = [
    "BARRIER_GRACE_S",
    "BARRIER_TIMEOUT",
    "CLI_COMMANDS",
    "COMMAND_NAMES",
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_HTTP_TIMEOUT_S",
    "DEFAULT_URL",
    "DEFAULT_WATCH_S",
    "EPILOG",
    "add_parsers",
]

#: The argument that is a barrier's timeout: it stands for the HTTP timeout's flag.
BARRIER_TIMEOUT: Final = "timeout_s"
#: Seconds between two showings of ``--watch`` when it names none.
DEFAULT_WATCH_S: Final = 2.0
#: The HTTP timeout when none is given (a barrier's: :data:`DEFAULT_BARRIER_TIMEOUT_S`).
DEFAULT_HTTP_TIMEOUT_S = 10.0
#: How much longer than its barrier's timeout a pause or continue waits for the answer.
BARRIER_GRACE_S = 10.0

#: ``{CLI name: catalogue entry}`` of every operator command, in the order help lists them.
CLI_COMMANDS: Final[dict[str, Command]] = by_cli_name()
#: The subcommands :func:`add_parsers` adds and :func:`run` runs.
COMMAND_NAMES: Final = frozenset(CLI_COMMANDS)

EPILOG = f"""\
environment:
  {URL_ENV}    the admin app, when --url is not given
                           (default {DEFAULT_URL})
  {TOKEN_ENV}  the bearer token, when --token is not given; prefer it to
                           --token, which other users can read in the process list
                           (--token= with nothing after it is a usage error)

exit status:
  0  success
  1  the operation failed or timed out: a 504 barrier answer (stragglers named), an
     unknown worker (404), a conflict (409), any other error answer
  2  usage error: an unknown flag, a bad value (a URL, an empty token, a timeout
     outside its range, an impossible worker id), checked before any request is sent
  3  the admin app is unreachable, or it refused the token (401, 403)
"""


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", type=url, help=f"the admin app (default: env {URL_ENV}, else {DEFAULT_URL})"
    )
    parser.add_argument(
        "--token",
        type=token,
        help=f"bearer token, never printed (default: env {TOKEN_ENV}, else none; an empty "
        "one is refused)",
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")


#: Checks of an argument's value beyond its type, by the argument's name.
_CHECKS: Final[dict[str, Callable[[str], Any]]] = {"worker_id": worker_id}


def _value_type(argument: Argument) -> Callable[[str], Any]:
    if argument.name in _CHECKS:
        return _CHECKS[argument.name]
    if argument.type == "float":
        if (argument.above, argument.at_most) == (0.0, MAX_BARRIER_TIMEOUT_S):
            return barrier_timeout
        return lambda text: finite_float(text, expected="a number")
    if argument.type == "int":
        return int
    return str


def _add_argument(parser: argparse.ArgumentParser, entry: Command, argument: Argument) -> None:
    """``argument`` of ``entry`` as an option of ``parser`` (a path's as a positional)."""
    aliases = entry.cli.flag_aliases.get(argument.name, ()) if entry.cli else ()
    if argument.place == "path":
        parser.add_argument(
            argument.name,
            metavar=argument.name.upper(),
            type=_value_type(argument),
            help=argument.summary,
        )
    elif argument.name == BARRIER_TIMEOUT:
        help_text = (
            f"{argument.summary}, more than 0 and at most {MAX_BARRIER_TIMEOUT_S:g} (default "
            f"{DEFAULT_BARRIER_TIMEOUT_S:g}; the HTTP wait is {BARRIER_GRACE_S:g} s longer)"
        )
        parser.add_argument(
            argument.flag,
            *aliases,
            dest="timeout",
            type=barrier_timeout,
            metavar="S",
            help=help_text,
        )
    elif argument.type == "bool":
        parser.add_argument(
            argument.flag,
            *aliases,
            dest=argument.name,
            action=argparse.BooleanOptionalAction,
            default=argument.default,
            help=f"{argument.summary} (default {'yes' if argument.default else 'no'})",
        )
    else:
        default = "none" if argument.default in (None, "") else argument.default
        parser.add_argument(
            argument.flag,
            *aliases,
            dest=argument.name,
            type=_value_type(argument),
            choices=argument.choices or None,
            default=argument.default,
            required=argument.required,
            help=f"{argument.summary} (default {default})",
        )


def add_parsers(sub: Any) -> None:
    """Add the operator commands to ``sub`` (an argparse subparsers action): one per
    catalogue entry with a CLI command, with its arguments."""
    for entry in COMMANDS:
        if entry.cli is None:
            continue
        help_text = entry.cli.help
        parser: argparse.ArgumentParser = sub.add_parser(
            entry.cli.name,
            help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}, through the admin app.",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_connection(parser)
        arguments = entry.arguments
        if all(argument.name != BARRIER_TIMEOUT for argument in arguments):
            parser.add_argument(
                "--timeout-s",
                "--timeout",
                dest="timeout",
                type=http_timeout,
                metavar="S",
                help=f"HTTP timeout in seconds (default {DEFAULT_HTTP_TIMEOUT_S:g})",
            )
        if entry.cli.watch:
            parser.add_argument(
                "--watch",
                nargs="?",
                const=DEFAULT_WATCH_S,
                type=watch_interval,
                metavar="S",
                help=f"show it again every S seconds (default {DEFAULT_WATCH_S:g}) until Ctrl-C",
            )
        if entry.cli.wait:
            parser.add_argument(
                "--wait",
                nargs="?",
                const=DEFAULT_WAIT_S,
                type=wait_seconds,
                metavar="S",
                help="then show its progress (what it holds) until it is safe to delete, "
                f"for at most S seconds (default {DEFAULT_WAIT_S:g}); exit 1 if it is not",
            )
        # The barrier's timeout first, where the HTTP timeout stands for other commands.
        for argument in sorted(arguments, key=lambda each: each.name != BARRIER_TIMEOUT):
            _add_argument(parser, entry, argument)
