"""Default and soak runs: ``make soak`` sets ``SWITCHBOARD_SOAK=1`` for the long variants.

Each figure of the suite that grows in a soak run is one :func:`scaled` value here,
so a test names its default and its soak size side by side.
"""

from __future__ import annotations

import os

__all__ = ["SOAK", "SOAK_ENV", "scaled"]

SOAK_ENV = "SWITCHBOARD_SOAK"
#: Whether this run is ``make soak``'s.
SOAK = os.environ.get(SOAK_ENV, "") == "1"


def scaled(default: int, soak: int) -> int:
    """``soak`` in a soak run, else ``default``."""
    return soak if SOAK else default
