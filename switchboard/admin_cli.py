"""Operator commands over the admin API: placeholder until they land (issue 4)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    """Add ``status``, ``workers``, ``pause``, ... to ``sub`` (not yet)."""


def run(args: argparse.Namespace) -> int:
    """Run one operator command; the exit status."""
    raise SystemExit(f"switchboard {args.command}: not yet")
