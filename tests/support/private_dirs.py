"""Run directories the privacy checks must refuse or accept: a chosen umask for a block,
and a directory owned by another user (root only: skipped elsewhere, failed under CI)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import running_in_ci

__all__ = ["foreign_directory", "umask"]


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """This process's umask is ``mask`` inside the block, and what it was afterwards."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def foreign_directory(path: Path) -> Path:
    """``path`` made (mode 0700) and handed to user ``nobody``: a directory this process
    did not make its own. Needs root; without it the test is skipped, or under
    ``CI=true`` (where the suite runs as root) failed."""
    if os.geteuid() != 0:
        if running_in_ci():
            pytest.fail("CI=true: giving a directory to another user needs root")
        pytest.skip("giving a directory to another user needs root")
    nobody = pwd.getpwnam("nobody")
    path.mkdir(mode=0o700)
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return path
