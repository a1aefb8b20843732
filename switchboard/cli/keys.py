"""``switchboard keys``: the keys of a stack that spans hosts.

``keys generate NAME`` writes a CURVE key pair for one host: ``NAME.secret`` (mode 600,
stays on that host) and ``NAME.public`` (one line of an authorised-keys file) in
``--dir``. ``keys stack FILE`` writes a fresh stack key (mode 600), the
``stack_key_file`` every host of the stack is given. Both print paths, never a secret,
and neither overwrites a file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from switchboard.cli.support import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``keys`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "keys", help="make CURVE key pairs for hosts that connect across machines"
    )
    actions = parser.add_subparsers(
        dest="keys_action",
        required=True,
        help="generate: write a new key pair; stack: write a new stack key",
    )
    generate = actions.add_parser("generate", help="write NAME.secret and NAME.public")
    generate.add_argument("name", help="the host's name (letters, digits, '-', '_', '.')")
    generate.add_argument(
        "--dir", type=Path, default=Path(), help="where to write them (default: here)"
    )
    stack = actions.add_parser("stack", help="write a new stack key to FILE (mode 600)")
    stack.add_argument("file", type=Path, help="the file to create (it must not exist)")


def run(args: argparse.Namespace) -> int:
    """Write the key pair or the stack key; :class:`UsageError` for a bad name, a
    missing directory or a file that exists."""
    if args.keys_action == "stack":
        return _write_stack_key(args.file)
    from router_core.curve_files import write_key_pair

    directory: Path = args.dir
    if not directory.is_dir():
        raise UsageError(f"--dir {directory}: not a directory")
    try:
        secret, public = write_key_pair(directory, args.name)
    except (ValueError, FileExistsError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"secret key pair: {secret} (mode 600; keep it on this host)")
    print(f"public key:      {public} (add its line to the control host's authorised keys)")
    return 0


def _write_stack_key(path: Path) -> int:
    from switchboard.supervisor.rundir import write_fresh_key

    if path.exists() or path.is_symlink():
        raise UsageError(f"{path}: exists already; a stack key is never overwritten")
    if not path.parent.is_dir():
        raise UsageError(f"{path}: {path.parent} is not a directory")
    write_fresh_key(path)
    print(f"stack key: {path} (mode 600; give every host of the stack this file)")
    return 0
