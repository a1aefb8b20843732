"""``switchboard logs``: print the log of the stack ``switchboard up --detach`` started.

That log (``<run dir>/supervisor.log``) holds the supervisor's lines and every child's,
each child's prefixed with its name and pid. ``--follow`` prints what is appended until
Ctrl-C or SIGTERM, or until the stack stops; a reader that goes away (``| head``) ends
it quietly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from switchboard.cli.down import add_run_dir_flags, run_dir_of

__all__ = ["add_parser", "run"]

_DEFAULT_LINES = 50


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def add_parser(sub: Any) -> None:
    """Add the ``logs`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "logs",
        help="print the log of the stack switchboard up --detach started",
        description="Print the last lines of <run dir>/supervisor.log, the log of the "
        "stack switchboard up --detach started there (the supervisor's lines and its "
        "children's, prefixed with their names). Exit 1 if there is no such log.",
    )
    add_run_dir_flags(parser)
    parser.add_argument(
        "-n",
        "--lines",
        type=_count,
        default=_DEFAULT_LINES,
        metavar="N",
        help=f"how many of the last lines to print first (default {_DEFAULT_LINES})",
    )
    parser.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="then print lines as they are appended, until Ctrl-C or SIGTERM or until "
        "the stack stops",
    )


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM set ``stop`` (no traceback) while the block runs."""

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def run(args: argparse.Namespace) -> int:
    """Print the log; the exit status (0, or 1 without a log)."""
    from switchboard.supervisor.log_tail import follow, last_lines
    from switchboard.supervisor.stack_record import LOG_FILE, lock_held

    run_dir = run_dir_of(args)
    log = run_dir / LOG_FILE
    try:
        stream = open(log, "rb")  # noqa: SIM115 (closed below, before following)
    except OSError as exc:
        print(
            f"switchboard logs: no log in run dir {run_dir} ({exc.strerror}; "
            "switchboard up --detach writes it)",
            file=sys.stderr,
        )
        return 1
    stop = threading.Event()
    # Handled before the first line is out, so a signal that follows it ends the loop.
    try:
        with _stop_on_signals(stop):
            with stream:
                _write(last_lines(stream, args.lines))
                offset = stream.tell()
            if args.follow:
                follow(log, _write, stop, lambda: lock_held(run_dir), offset=offset)
    except BrokenPipeError:
        # The reader left (| head): say nothing more, and keep Python's exit flush from
        # failing on the closed pipe too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0
