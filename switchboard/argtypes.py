"""The number parsers that ``switchboard.cli`` and ``switchboard.admin_cli`` share.

A leaf module: it imports the standard library only, so both command packages can use
it without either importing the other (``switchboard.cli`` imports ``admin_cli`` to add
its parsers; the reverse would be a cycle) and without loading anything heavier.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["finite_float"]


def finite_float(text: str, *, expected: str = "a number") -> float:
    """``text`` as a finite float, for an ``argparse`` type.

    Raises :class:`argparse.ArgumentTypeError` with ``expected <expected>, got '<text>'``
    when ``text`` is not a number at all, and ``must be finite, got <text>`` for ``inf``,
    ``-inf`` or ``nan``. The caller checks the range.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value
