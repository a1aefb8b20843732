"""The operator commands' command line: one subcommand per catalogue entry with a CLI
name, its arguments as options, and the connection flags every command takes.

Costs only argparse and the catalogue (plain data) to import: every ``switchboard``
process builds the parser.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

from app.catalogue import (
    COMMANDS,
    DEFAULT_BARRIER_TIMEOUT_S,
    TIMEOUT,
    WORKER_ID,
    Argument,
    Command,
    by_cli_name,
)
from switchboard.admin_cli.arguments import (
    DEFAULT_URL,
    MAX_BARRIER_TIMEOUT_S,
    TOKEN_ENV,
    URL_ENV,
    barrier_timeout,
    http_timeout,
    token,
    url,
    worker_id,
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
]

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


def _add_argument(parser: argparse.ArgumentParser, argument: Argument) -> None:
    """``argument`` of the catalogue as an option (or a positional) of ``parser``."""
    if argument.cli_flag is None:
        parser.add_argument(
            argument.name,
            metavar=argument.metavar,
            type=worker_id if argument is WORKER_ID else str,
            help=argument.summary,
        )
    elif argument is TIMEOUT:
        help_text = (
            f"{argument.summary}, more than 0 and at most {MAX_BARRIER_TIMEOUT_S:g} (default "
            f"{DEFAULT_BARRIER_TIMEOUT_S:g}; the HTTP wait is {BARRIER_GRACE_S:g} s longer)"
        )
        parser.add_argument(
            argument.cli_flag,
            *argument.cli_aliases,
            dest="timeout",
            type=barrier_timeout,
            metavar="S",
            help=help_text,
        )
    else:
        parser.add_argument(
            argument.cli_flag,
            choices=argument.choices or None,
            default=argument.default,
            help=f"{argument.summary} (default {argument.default})",
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
        if TIMEOUT not in entry.arguments:
            parser.add_argument(
                TIMEOUT.cli_flag or "--timeout-s",
                *TIMEOUT.cli_aliases,
                dest="timeout",
                type=http_timeout,
                metavar="S",
                help=f"HTTP timeout in seconds (default {DEFAULT_HTTP_TIMEOUT_S:g})",
            )
        # The barrier's timeout first, where the HTTP timeout stands for other commands.
        for argument in sorted(entry.arguments, key=lambda each: each is not TIMEOUT):
            _add_argument(parser, argument)
