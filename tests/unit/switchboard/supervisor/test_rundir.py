"""The supervisor's run directory: created private whatever the umask, an unsafe given
one refused before anything starts (preflight) and at open, a fresh stack key per start,
removed at the end."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from router_core.credentials import KEY_FILE, read_key
from switchboard.supervisor.preflight import check_run_dir
from switchboard.supervisor.rundir import RunDirectory, write_fresh_key
from switchboard.supervisor.settings import SettingsError
from tests.support.private_dirs import foreign_directory, umask


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class TestRunDirectoryOpen:
    """RunDirectory.open and close for a given directory."""

    def test_missing_directory_is_created_private_under_umask_000(self, tmp_path: Path) -> None:
        """A given directory that does not exist is made 0700, its key 0600, under umask
        000; close removes the key and leaves the directory."""
        run_dir = RunDirectory(tmp_path / "run")
        with umask(0o000):
            path = run_dir.open()
        assert _mode(path) == 0o700
        assert _mode(path / KEY_FILE) == 0o600
        assert len(read_key(path / KEY_FILE)) == 64
        run_dir.close([])
        assert path.is_dir()
        assert not (path / KEY_FILE).exists()

    def test_every_start_has_a_fresh_key(self, tmp_path: Path) -> None:
        """A key left from an earlier run is replaced, so it is worth nothing now."""
        given = tmp_path / "run"
        given.mkdir(mode=0o700)
        write_fresh_key(given / KEY_FILE)
        old = read_key(given / KEY_FILE)
        run_dir = RunDirectory(given)
        run_dir.open()
        assert read_key(run_dir.key_file) != old
        assert [entry.name for entry in given.iterdir()] == [KEY_FILE]
        run_dir.close([])

    def test_open_directory_is_refused(self, tmp_path: Path) -> None:
        """An existing 0777 directory is refused with a SettingsError naming the fix, and
        nothing is written into it."""
        given = tmp_path / "run"
        given.mkdir()
        given.chmod(0o777)
        with pytest.raises(SettingsError, match=rf"run_dir {given}: mode 0777 .*chmod 700"):
            RunDirectory(given).open()
        assert list(given.iterdir()) == []

    def test_temporary_directory_is_private_with_a_key(self) -> None:
        """The default temporary run dir is 0700 with its key, and removed at close."""
        run_dir = RunDirectory(None)
        with umask(0o000):
            path = run_dir.open()
        assert _mode(path) == 0o700
        assert _mode(run_dir.key_file) == 0o600
        run_dir.close([])
        assert not path.exists()


class TestPreflightRunDir:
    """preflight.check_run_dir refuses an unsafe run directory in one line."""

    def test_open_directory_is_refused(self, tmp_path: Path) -> None:
        """A 0777 run dir is refused before anything starts."""
        given = tmp_path / "run"
        given.mkdir()
        given.chmod(0o777)
        with pytest.raises(SettingsError, match=r"mode 0777 lets other users .*chmod 700"):
            check_run_dir(given)

    def test_directory_of_another_user_is_refused(self, tmp_path: Path) -> None:
        """A run dir owned by another user is refused."""
        given = foreign_directory(tmp_path / "theirs")
        with pytest.raises(SettingsError, match="not by this user"):
            check_run_dir(given)

    def test_symbolic_link_is_refused(self, tmp_path: Path) -> None:
        """A run dir given as a symbolic link is refused, even to a private directory."""
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        (tmp_path / "link").symlink_to(real)
        with pytest.raises(SettingsError, match="symbolic link"):
            check_run_dir(tmp_path / "link")

    def test_missing_or_private_directory_passes(self, tmp_path: Path) -> None:
        """A run dir that does not exist yet (made private later) or is private passes."""
        check_run_dir(tmp_path / "later")
        check_run_dir(tmp_path)
