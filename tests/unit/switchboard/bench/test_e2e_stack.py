"""Tests for the stack ``switchboard bench e2e`` runs (switchboard.bench.e2e_stack): the run
directory read from a child's flags, and a stack that cannot start."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.bench.e2e_stack import Stack, StackConfig, run_dir_of
from switchboard.bench.procs import BenchError

PY = "/venv/bin/python3"


class TestRunDirOf:
    """run_dir_of: the run directory of a child, read from its command line."""

    def test_run_dir_of_a_child(self) -> None:
        """The run directory is read from a child's ``--run-dir`` flag."""
        assert run_dir_of([PY, "-m", "switchboard.cli", "router", "--run-dir", "/r"]) == Path("/r")
        assert run_dir_of([PY, "-m", "switchboard.cli", "up"]) is None


@pytest.mark.integration
class TestStack:
    """A real stack, as the suite starts it."""

    def test_a_stack_that_cannot_start_is_an_error(self, clean_tmpdir: Path) -> None:
        """A supervisor that exits at startup raises BenchError with its message."""
        stack = Stack(StackConfig(workers=0), clean_tmpdir)
        try:
            stack.launch()
            with pytest.raises(BenchError, match="workers"):
                stack.wait_serving()
        finally:
            stack.stop()
