"""``switchboard admin``: placeholder until the admin app lands (issue 4)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, add_common: Any) -> None:
    """Add the ``admin`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser("admin", help="run the admin app (not yet)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    """Serve the admin app until SIGTERM; the exit status."""
    raise SystemExit("switchboard admin: not yet")
