"""router_core.run_dir: a run directory is created private whatever the umask, and one
that others could reach, that is someone else's or that is a link is refused in one line
saying how to fix it; router_core.process keeps every process's files private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from router_core.process import PRIVATE_UMASK, use_private_umask
from router_core.run_dir import PRIVATE_MODE, RunDirError, check_private, make_private
from tests.support.private_dirs import foreign_directory, umask


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class TestMakePrivate:
    """make_private: created 0700 whatever the umask; an existing one is checked."""

    def test_created_private_under_umask_000(self, tmp_path: Path) -> None:
        """Under umask 000 the directory (and any parent it makes) is still 0700."""
        target = tmp_path / "parent" / "run"
        with umask(0o000):
            assert make_private(target) == target
        assert _mode(target) == PRIVATE_MODE

    def test_owner_keeps_full_access_under_a_strict_umask(self, tmp_path: Path) -> None:
        """A umask that takes the owner's own bits away does not leave an unusable dir."""
        with umask(0o277):
            make_private(tmp_path / "run")
        assert _mode(tmp_path / "run") == PRIVATE_MODE

    def test_existing_private_directory_is_used(self, tmp_path: Path) -> None:
        """A 0700 directory of this user's is returned as it is."""
        target = tmp_path / "run"
        target.mkdir(mode=0o700)
        assert make_private(target) == target

    def test_existing_open_directory_is_refused_and_left_alone(self, tmp_path: Path) -> None:
        """A 0777 directory that already existed is refused, not quietly chmod'ed (it may
        hold others' files already)."""
        target = tmp_path / "run"
        target.mkdir()
        target.chmod(0o777)
        with pytest.raises(RunDirError, match=r"mode 0777 .* \(chmod 700 .*run, or use another"):
            make_private(target)
        assert _mode(target) == 0o777


class TestCheckPrivate:
    """check_private: one refusal per way a directory can be unsafe."""

    @pytest.mark.parametrize("mode", [0o777, 0o755, 0o750, 0o701, 0o710, 0o702])
    def test_any_group_or_other_bit_is_refused(self, tmp_path: Path, mode: int) -> None:
        """Any permission for group or others is refused, naming the mode and the fix."""
        target = tmp_path / "run"
        target.mkdir()
        target.chmod(mode)
        with pytest.raises(RunDirError) as refused:
            check_private(target)
        assert str(refused.value) == (
            f"mode {mode:04o} lets other users reach the stack's sockets and key "
            f"(chmod 700 {target}, or use another directory)"
        )

    def test_private_directory_passes(self, tmp_path: Path) -> None:
        """A 0700 directory of this user's passes."""
        target = tmp_path / "run"
        target.mkdir(mode=0o700)
        check_private(target)

    def test_directory_of_another_user_is_refused(self, tmp_path: Path) -> None:
        """A directory owned by another user is refused even at mode 0700."""
        target = foreign_directory(tmp_path / "theirs")
        with pytest.raises(RunDirError, match=r"owned by uid \d+, not by this user .* your own"):
            check_private(target)

    def test_symbolic_link_is_refused(self, tmp_path: Path) -> None:
        """A link to a private directory is refused: it could be pointed elsewhere."""
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        link = tmp_path / "link"
        link.symlink_to(real)
        with pytest.raises(RunDirError, match="is a symbolic link"):
            check_private(link)
        with pytest.raises(RunDirError, match="is a symbolic link"):
            make_private(link)

    def test_file_and_missing_path_are_not_directories(self, tmp_path: Path) -> None:
        """A regular file, and a path with nothing there, are refused as not directories."""
        regular = tmp_path / "file"
        regular.write_text("")
        for path in (regular, tmp_path / "absent"):
            with pytest.raises(RunDirError, match=r"^not a directory$"):
                check_private(path)


class TestPrivateUmask:
    """use_private_umask: what a process creates afterwards is its user's alone."""

    def test_files_become_private_under_umask_000(self, tmp_path: Path) -> None:
        """Started with umask 000, a file created after the call is not group/world
        accessible, and the previous umask is returned."""
        with umask(0o000):
            assert use_private_umask() == 0o000
            descriptor = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY, 0o666)
            os.close(descriptor)
            (tmp_path / "d").mkdir(mode=0o777)
        assert _mode(tmp_path / "f") == 0o600
        assert _mode(tmp_path / "d") == 0o700

    def test_stricter_umask_is_kept(self) -> None:
        """A umask already stricter than the private one loses none of its bits."""
        with umask(0o277):
            use_private_umask()
            assert os.umask(0o277) == 0o277 | PRIVATE_UMASK
