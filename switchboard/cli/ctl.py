"""``switchboard ctl``: send one control command to a router and print the JSON result.

The router is found in ``--run-dir`` (the tokenizer router's control socket, or with
``--detok-router`` the detokenizer router's) or at ``--endpoint``. Every request
carries the stack key, read from ``--key-file`` or the run directory's ``stack.key``,
and says it comes from ``ctl`` (``--actor``), which the router's audit lines name. A
``tcp://`` endpoint is CURVE (``--curve-key-pair``, ``--server-public-key``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switchboard.cli.access import client_key
from switchboard.cli.support import UsageError, run_dir, seconds

if TYPE_CHECKING:
    from router_core.curve import ClientKeys

__all__ = ["add_parser", "endpoint", "parse_arguments", "run", "typed_request"]


def add_parser(sub: Any) -> None:
    """Add the ``ctl`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "ctl", help="send one control command and print the JSON result"
    )
    parser.add_argument(
        "--run-dir",
        help="the stack's run directory: its router and its stack.key (default: none; "
        "--endpoint is then required)",
    )
    parser.add_argument("--endpoint", help="the control endpoint (default: in --run-dir)")
    parser.add_argument(
        "--detok-router",
        action="store_true",
        help="the detokenizer router's control socket in --run-dir (default: the tokenizer "
        "router's)",
    )
    parser.add_argument(
        "--key-file",
        help="the stack key sent with the command (default: stack.key in --run-dir; none "
        "without one)",
    )
    parser.add_argument(
        "--actor",
        default="ctl",
        help="who asks, as the router's audit lines name it (default %(default)s)",
    )
    parser.add_argument(
        "--timeout-s",
        "--timeout",
        dest="timeout_s",
        type=seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for the answer (default %(default)s)",
    )
    parser.add_argument(
        "--curve-key-pair",
        help="this client's .secret file, for a tcp:// --endpoint (its public key in the "
        "router's --control-authorised-keys; default: none)",
    )
    parser.add_argument(
        "--server-public-key",
        help="the router's .public file, for a tcp:// --endpoint (default: none)",
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


def endpoint(args: argparse.Namespace, directory: str | None) -> str:
    """``--endpoint``, else the chosen router's control socket in the run directory."""
    from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints

    if args.endpoint:
        given: str = args.endpoint
        return given
    if directory is None:
        raise UsageError("give --run-dir or --endpoint")
    if args.detok_router:
        return DetokenizerRouterEndpoints.in_run_dir(directory, 1).control
    return RouterEndpoints.in_run_dir(directory).control


def typed_request(name: str, pairs: Sequence[str], *, detok_router: bool) -> tuple[Any, Any]:
    """The command ``name`` of the chosen router and its argument struct from ``pairs``;
    UsageError naming the command's arguments for an unknown name or a bad argument."""
    import msgspec

    from router_core.control.commands import (
        DETOKENIZER_ROUTER_COMMANDS,
        TOKENIZER_ROUTER_COMMANDS,
    )

    commands = DETOKENIZER_ROUTER_COMMANDS if detok_router else TOKENIZER_ROUTER_COMMANDS
    command = commands.get(name)
    if command is None:
        raise UsageError(f"no command {name!r}; known: {', '.join(sorted(commands))}")
    try:
        args = msgspec.convert(parse_arguments(pairs), command.args_type)
    except msgspec.ValidationError as exc:
        fields = ", ".join(f"{each.name}=" for each in command.arguments) or "none"
        raise UsageError(f"{name}: {exc} (its arguments: {fields})") from None
    return command, args


def curve_keys(args: argparse.Namespace) -> ClientKeys | None:
    """The CURVE keys the flags name (None: neither flag); :class:`UsageError` for only
    one of them or a file that cannot be used."""
    # Imported here: every switchboard command builds this parser.
    from router_core.credentials import KeyFileError
    from router_core.curve import ClientKeys, read_public_key
    from router_core.curve_files import read_key_pair

    if args.curve_key_pair is None and args.server_public_key is None:
        return None
    if args.curve_key_pair is None or args.server_public_key is None:
        raise UsageError("give both --curve-key-pair and --server-public-key, or neither")
    try:
        pair = read_key_pair(Path(args.curve_key_pair))
        server = read_public_key(Path(args.server_public_key))
    except KeyFileError as exc:
        raise UsageError(str(exc)) from exc
    return ClientKeys(pair, server)


def run(args: argparse.Namespace) -> int:
    """0 with the result on stdout; 1 with the router's error on stderr."""
    import msgspec

    from router_core.control import ControlClient, ControlError

    command, parsed = typed_request(args.name, args.args, detok_router=args.detok_router)
    directory = run_dir(args)
    target = endpoint(args, directory)
    key = client_key(args, directory)
    try:
        client = ControlClient(
            target, timeout_s=args.timeout_s, key=key, actor=args.actor, curve=curve_keys(args)
        )
    except ValueError as exc:
        raise UsageError(f"{exc} (--curve-key-pair and --server-public-key)") from exc
    with client:
        try:
            result = client.request(command, parsed)
        except ControlError as exc:
            print(f"switchboard ctl: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(msgspec.to_builtins(result), indent=2, sort_keys=True))
    return 0
