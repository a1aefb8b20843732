"""``switchboard down``: stop the stack ``switchboard up --detach`` started from a run dir.

Parsing costs the standard library only; stopping loads the supervisor's modules
(:func:`switchboard.supervisor.down.stop_detached`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser", "add_run_dir_flags", "run", "run_dir_of"]

#: Kept equal to :data:`switchboard.supervisor.down.DEFAULT_DOWN_TIMEOUT_S` (a test
#: holds them together) so that ``--help`` does not load the supervisor.
_DEFAULT_TIMEOUT_S = 120.0


def add_run_dir_flags(parser: argparse.ArgumentParser) -> None:
    """``--run-dir`` and ``--config``: how ``down`` and ``logs`` find the stack."""
    parser.add_argument(
        "--run-dir",
        metavar="DIR",
        help="the run dir the stack was started with (default: SWITCHBOARD_RUN_DIR, or "
        "run_dir in the --config file, as switchboard up reads them)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the TOML file the stack was started with (default: none)",
    )


def run_dir_of(args: argparse.Namespace) -> Any:
    """The run dir ``args`` name (a Path); UsageError when none is named or the settings
    naming it are bad."""
    from switchboard.cli.support import UsageError
    from switchboard.supervisor.down import given_run_dir
    from switchboard.supervisor.settings import SettingsError

    try:
        path = given_run_dir(args.run_dir, args.config)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    if path is None:
        raise UsageError(
            "no run dir: give the one the stack was started with (--run-dir DIR, "
            "SWITCHBOARD_RUN_DIR or run_dir in --config)"
        )
    return path


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def add_parser(sub: Any) -> None:
    """Add the ``down`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "down",
        help="stop the stack switchboard up --detach started",
        description="Stop the stack that switchboard up --detach started from a run dir: "
        "SIGTERM to its supervisor, which drains the workers and stops everything in "
        "order, then wait. Exit 0 once it stopped; 1 if no stack runs there, or if it "
        "did not stop in time (its processes are then killed with SIGKILL, said on "
        "stderr).",
    )
    add_run_dir_flags(parser)
    parser.add_argument(
        "--timeout-s",
        type=_seconds,
        default=_DEFAULT_TIMEOUT_S,
        metavar="S",
        help="how long the stack has to stop after SIGTERM before SIGKILL "
        f"(default {_DEFAULT_TIMEOUT_S:g})",
    )


def run(args: argparse.Namespace) -> int:
    """Stop the stack; the exit status."""
    from switchboard.supervisor.down import stop_detached

    return stop_detached(run_dir_of(args), args.timeout_s, sys.stdout, sys.stderr)
