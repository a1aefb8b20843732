"""Fixtures of the bench tests: roots for the trials' and stacks' directories that must be
empty afterwards, with no process started by the test left running."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest


def _left_empty(prefix: str) -> Iterator[Path]:
    """A new directory under the system temp dir; once the test is done it must be empty
    and no process the test started may be left running."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
        assert list(root.iterdir()) == []
        after = {child.pid for child in psutil.Process().children(recursive=True)}
        assert after <= before
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def clean_root() -> Iterator[Path]:
    """A root for trial directories; afterwards it must be empty and no child left.

    Made under the system temp dir, not pytest's ``tmp_path``: socket paths in it must
    stay within the 107 bytes of ``sun_path``.
    """
    yield from _left_empty("sbt-")


@pytest.fixture
def clean_tmpdir() -> Iterator[Path]:
    """A TMPDIR for the stacks' run directories; afterwards it must be empty and no
    process started by the test may be left running."""
    yield from _left_empty("sbe-")
