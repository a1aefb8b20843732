"""Operator commands over the admin app's HTTP API: ``switchboard status``, ``workers``,
``pause``, ``continue``, ``drain``, ``undrain`` and ``load``.

:mod:`switchboard.cli` calls :func:`add_parsers` for every command line and :func:`run`
for these commands. Importing this package costs only argparse: every ``switchboard``
process builds the parser, and only these commands need httpx.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = [
    "BARRIER_GRACE_S",
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_HTTP_TIMEOUT_S",
    "DEFAULT_URL",
    "EPILOG",
    "add_parsers",
    "run",
]

DEFAULT_URL = "http://127.0.0.1:8001"
#: The HTTP timeout, and the barrier timeout of pause and continue, when none is given.
DEFAULT_HTTP_TIMEOUT_S = 10.0
DEFAULT_BARRIER_TIMEOUT_S = 5.0
#: How much longer than its barrier's timeout a pause or continue waits for the answer.
BARRIER_GRACE_S = 10.0

EPILOG = f"""\
environment:
  SWITCHBOARD_ADMIN_URL    the admin app, when --url is not given
                           (default {DEFAULT_URL})
  SWITCHBOARD_ADMIN_TOKEN  the bearer token, when --token is not given; prefer it to
                           --token, which other users can read in the process list

exit status:
  0  success
  1  the operation failed or timed out: a 504 barrier answer (stragglers named), an
     unknown worker (404), a conflict (409), any other error answer
  2  usage error: a bad flag, URL or token
  3  the admin app is unreachable, or it refused the token (401, 403)
"""

_MODES = ("abort", "retract", "in_place")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _add_connection(parser: argparse.ArgumentParser, *, barrier: bool) -> None:
    parser.add_argument(
        "--url", help=f"the admin app (env SWITCHBOARD_ADMIN_URL; default {DEFAULT_URL})"
    )
    parser.add_argument("--token", help="bearer token (env SWITCHBOARD_ADMIN_TOKEN; never printed)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
    if barrier:
        help_text = (
            "seconds every worker and the engine get to acknowledge (default "
            f"{DEFAULT_BARRIER_TIMEOUT_S:g}; the HTTP wait is {BARRIER_GRACE_S:g} s longer)"
        )
    else:
        help_text = f"HTTP timeout in seconds (default {DEFAULT_HTTP_TIMEOUT_S:g})"
    parser.add_argument("--timeout", type=_seconds, metavar="S", help=help_text)


def add_parsers(sub: Any) -> None:
    """Add the operator commands to ``sub`` (an argparse subparsers action)."""

    def add(name: str, help_text: str, *, barrier: bool = False) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name,
            help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}, through the admin app.",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_connection(parser, barrier=barrier)
        return parser

    add("status", "show pause state, engine load, workers by state and recent operations")
    add("workers", "list the workers: state, in-flight, last heartbeat, safe to delete")
    pause = add("pause", "pause generation on every worker and the engine", barrier=True)
    pause.add_argument(
        "--mode",
        choices=_MODES,
        default="abort",
        help="abort: in-flight requests end with finish reason abort; retract: they go back "
        "to the engine's queue and finish after continue; in_place: they freeze where they "
        "are (default abort)",
    )
    add("continue", "resume generation after a pause", barrier=True)
    for verb, help_text in (
        ("drain", "stop one worker admitting requests (it finishes those it has)"),
        ("undrain", "let a draining or drained worker admit requests again"),
    ):
        add(verb, help_text).add_argument("worker_id", metavar="ID", help="the worker's id")
    add("load", "show the engine's latest load report")


def run(args: argparse.Namespace) -> int:
    """Run one operator command; its exit status (see :data:`EPILOG`)."""
    from switchboard.admin_cli.commands import execute

    return execute(args)
