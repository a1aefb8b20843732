"""``down`` and ``logs`` find the stack by its run dir, and refuse when none runs there."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from switchboard.supervisor.down import given_run_dir, stop_detached
from switchboard.supervisor.stack_record import LOCK_FILE, StackRecord, hold_lock, write_record


class TestGivenRunDir:
    """The flag, else the variable or the file, as up reads them."""

    def test_flag_wins(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """--run-dir beats SWITCHBOARD_RUN_DIR."""
        monkeypatch.setenv("SWITCHBOARD_RUN_DIR", str(tmp_path / "env"))
        assert given_run_dir(str(tmp_path / "flag"), None) == (tmp_path / "flag").resolve()

    def test_environment_then_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the flag, the variable; without it, the file's run_dir; else None."""
        config = tmp_path / "stack.toml"
        config.write_text(f'run_dir = "{tmp_path / "file"}"\n')
        assert given_run_dir(None, str(config)) == (tmp_path / "file").resolve()
        assert given_run_dir(None, None) is None
        monkeypatch.setenv("SWITCHBOARD_RUN_DIR", str(tmp_path / "env"))
        assert given_run_dir(None, str(config)) == (tmp_path / "env").resolve()


class TestStopRefusals:
    """down signals nothing unless the locked supervisor is the recorded one."""

    def test_nothing_running(self, tmp_path: Path) -> None:
        """No lock held: exit 1, saying so (and that none was ever started there)."""
        err = io.StringIO()
        assert stop_detached(tmp_path, 1.0, io.StringIO(), err) == 1
        assert err.getvalue() == (
            f"switchboard down: no stack is running from run dir {tmp_path} "
            "(none was ever started there)\n"
        )
        (tmp_path / LOCK_FILE).touch()
        err = io.StringIO()
        assert stop_detached(tmp_path, 1.0, io.StringIO(), err) == 1
        assert "(none was ever started there)" not in err.getvalue()

    def test_record_of_another_group_is_not_signalled(self, tmp_path: Path) -> None:
        """A held lock whose record names a pid outside its recorded group: exit 1, no
        signal (the pid is this test's own process, which would notice a SIGTERM)."""
        write_record(tmp_path, StackRecord(os.getpid(), os.getpgid(0) + 1, "tok"))
        descriptor = hold_lock(tmp_path)
        try:
            err = io.StringIO()
            assert stop_detached(tmp_path, 1.0, io.StringIO(), err) == 1
            assert "names another process; not signalling anything" in err.getvalue()
        finally:
            os.close(descriptor)
