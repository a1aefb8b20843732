"""The installed version of Switchboard, for status replies and registrations."""

from __future__ import annotations

import functools

__all__ = ["package_version"]


@functools.cache
def package_version() -> str:
    """The ``switchboard`` distribution's version, or ``0.0.0+unknown`` when not installed.

    Looked up on first use: ``importlib.metadata`` costs ~0.1 s at import.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("switchboard")
    except PackageNotFoundError:
        return "0.0.0+unknown"
