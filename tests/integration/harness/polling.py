"""Polling with a deadline, and small facts about the environment and run directory.

Tests never sleep and hope: they call :func:`wait_until` with a predicate and a deadline.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

__all__ = [
    "REPO_ROOT",
    "child_env",
    "ipc_path",
    "missing",
    "running_in_ci",
    "socket_files",
    "wait_until",
]

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[3]


def running_in_ci() -> bool:
    """Whether this run is CI's (``CI=true``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(what: str) -> None:
    """A component the suite needs is absent: fail under CI, skip elsewhere."""
    if running_in_ci():
        pytest.fail(f"missing component (CI=true forbids skipping): {what}")
    pytest.skip(f"missing component: {what}")


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    message: str | Callable[[], str] = "condition",
    interval: float = 0.02,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Raises AssertionError naming ``message`` once ``timeout`` seconds have passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for: {text}")
        time.sleep(interval)


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
