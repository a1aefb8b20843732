"""Polling with a deadline, and small facts about the environment and run directory.

Tests never sleep and hope: they call :func:`wait_until` (from :mod:`tests.support.eventually`,
shared with the unit tests) with a predicate and a deadline.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.support.eventually import wait_until

__all__ = [
    "REPO_ROOT",
    "child_env",
    "ipc_path",
    "missing",
    "running_in_ci",
    "socket_files",
    "wait_until",
]

REPO_ROOT = Path(__file__).resolve().parents[3]


def running_in_ci() -> bool:
    """Whether this run is CI's (``CI=true``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(what: str) -> None:
    """A component the suite needs is absent: fail under CI, skip elsewhere."""
    if running_in_ci():
        pytest.fail(f"missing component (CI=true forbids skipping): {what}")
    pytest.skip(f"missing component: {what}")


def ipc_path(endpoint: str) -> Path:
    """The socket file of an ``ipc://`` endpoint."""
    assert endpoint.startswith("ipc://"), endpoint
    return Path(endpoint.removeprefix("ipc://"))


def socket_files(directory: Path) -> list[Path]:
    """Unix socket files directly inside ``directory``."""
    found = []
    for path in directory.iterdir():
        try:
            if stat.S_ISSOCK(path.lstat().st_mode):
                found.append(path)
        except FileNotFoundError:
            continue
    return sorted(found)


def child_env() -> dict[str, str]:
    """The environment of every spawned process: this repo importable, output unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env
