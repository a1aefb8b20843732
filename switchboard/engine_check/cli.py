"""``switchboard engine-check``: check that an engine keeps the engine's side of the
protocol, playing the routers' part on its own endpoints.

``--engine-command "CMD"`` starts the command as ``switchboard up --engine-command``
would (placeholders and ``SWITCHBOARD_*`` variables of the engine-command contract) in a
private run dir of its own; ``--run-dir DIR`` checks an engine already started on that
run dir's endpoints (its ``stack.key``; ``restart`` is then not run). It prints one row
per duty (``--json``: one JSON document) and exits 0 when every duty that ran conforms,
1 otherwise, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from switchboard.cli.support import UsageError, seconds, tokenizer_flag

__all__ = ["DEFAULT_TIMEOUT_S", "add_parser", "run"]

#: Seconds each step of a check waits for the engine at most.
DEFAULT_TIMEOUT_S = 10.0


def add_parser(sub: Any) -> None:
    """Add the ``engine-check`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "engine-check",
        help="check that an engine keeps the protocol (docs/engine-check.md)",
        description="Check that an engine keeps the engine's side of the protocol "
        "(docs/protocol.md), playing the routers' part on its own endpoints: one row per "
        "duty, ok / FAIL (with the fix) / not run; exit 0 when every duty that ran "
        "conforms, 1 otherwise, 2 for a bad command line.",
    )
    # Not required=True: an unknown flag is then reported first, as by every subcommand.
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--engine-command",
        metavar="CMD",
        help="the engine's command line, as for switchboard up --engine-command: split "
        "like a shell (not run by one), placeholders {inbound} {events} {outputs} "
        "{run_dir} {key_file} {vocab_file} {parent_pid} (default: none; this or --run-dir)",
    )
    which.add_argument(
        "--run-dir",
        metavar="DIR",
        help="check an engine already running on this run dir's endpoints, with its stack.key "
        "(default: none; this or --engine-command)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="the tokenizer.json or model directory whose ids the engine takes (default: "
        "the built-in one)",
    )
    parser.add_argument(
        "--engine-cwd",
        metavar="DIR",
        help="the engine's working directory (default: the current one)",
    )
    parser.add_argument(
        "--timeout-s",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help="seconds each step waits for the engine at most (default %(default)s)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (the same rows) instead of the table",
    )


def run(args: argparse.Namespace) -> int:
    """Run the checks and print the report; the exit status (0 conforms, 1 not)."""
    from switchboard.engine_check.report import as_json, as_table, exit_status
    from switchboard.engine_check.runner import check_engine_command, check_engine_on_run_dir
    from switchboard.supervisor.engine_command import EngineCommandError, check_command

    if args.engine_command is None and args.run_dir is None:
        raise UsageError("give --engine-command CMD or --run-dir DIR (see --help)")
    codec = tokenizer_flag(args)
    last_lines = ""
    if args.engine_command is not None:
        try:
            check_command(args.engine_command)
        except EngineCommandError as exc:
            raise UsageError(f"--engine-command {exc}") from None
        cwd = Path(args.engine_cwd) if args.engine_cwd else Path.cwd()
        if not cwd.is_dir():
            raise UsageError(f"--engine-cwd {cwd}: not a directory")
        findings, last_lines = check_engine_command(
            args.engine_command, codec, cwd=cwd, timeout_s=args.timeout_s
        )
        engine = args.engine_command
    else:
        if args.engine_cwd:
            raise UsageError("--engine-cwd needs --engine-command")
        findings = _check_run_dir(
            Path(args.run_dir), codec, args.timeout_s, check_engine_on_run_dir
        )
        engine = args.run_dir
    status = exit_status(findings)
    if args.json:
        print(as_json(findings, engine, last_lines))
    else:
        print(as_table(findings))
        if status and last_lines:
            print(f"the engine's last lines: {last_lines}")
    return status


def _check_run_dir(run_dir: Path, codec: Any, timeout_s: float, check: Any) -> Any:
    from router_core.credentials import KeyFileError
    from router_core.run_dir import RunDirError, check_private

    try:
        check_private(run_dir)
        return check(run_dir, codec, timeout_s=timeout_s)
    except (RunDirError, KeyFileError) as exc:
        raise UsageError(f"--run-dir {run_dir}: {exc}") from None
