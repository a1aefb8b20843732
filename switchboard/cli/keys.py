"""``switchboard keys generate NAME``: a CURVE key pair for one host.

Writes ``NAME.secret`` (mode 600, stays on that host) and ``NAME.public`` (one line of an
authorised-keys file) in ``--dir``, and prints the two paths, never the secret.
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
        dest="keys_action", required=True, help="generate: write a new key pair"
    )
    generate = actions.add_parser("generate", help="write NAME.secret and NAME.public")
    generate.add_argument("name", help="the host's name (letters, digits, '-', '_', '.')")
    generate.add_argument(
        "--dir", type=Path, default=Path(), help="where to write them (default: here)"
    )


def run(args: argparse.Namespace) -> int:
    """Write the key pair; :class:`UsageError` for a bad name or an existing pair."""
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
