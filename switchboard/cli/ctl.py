"""``switchboard ctl``: send one control command to a router and print the JSON result."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from switchboard.cli.support import UsageError, seconds

__all__ = ["add_parser", "parse_arguments", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``ctl`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "ctl", help="send one control command and print the JSON result"
    )
    parser.add_argument("--endpoint", required=True, help="the control endpoint")
    parser.add_argument(
        "--timeout-s",
        "--timeout",
        dest="timeout_s",
        type=seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for the answer (default %(default)s)",
    )
    parser.add_argument("name", help="command name, e.g. status, list_workers, pause")
    parser.add_argument("args", nargs="*", help="key=value arguments (values parsed as JSON)")


def parse_arguments(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` words as keyword arguments, each value JSON if it parses, else text."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r}: expected key=value")
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return parsed


def run(args: argparse.Namespace) -> int:
    """0 with the result on stdout; 1 with the router's error on stderr."""
    import msgspec

    from router_core.control import ControlClient, ControlError

    with ControlClient(args.endpoint, timeout_s=args.timeout_s) as client:
        try:
            result = client.call(args.name, **parse_arguments(args.args))
        except ControlError as exc:
            print(f"switchboard ctl: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(msgspec.to_builtins(result), indent=2, sort_keys=True))
    return 0
