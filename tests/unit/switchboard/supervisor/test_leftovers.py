"""Temporary run directories left by a killed supervisor: which are stale (owner gone,
no socket listened on, ours), and the next temporary run directory's start removes them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.supervisor.leftovers import OWNER_FILE, owner_record, remove_stale, stale
from switchboard.supervisor.rundir import RunDirectory, socket_in_use


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def left_behind(base: Path, name: str, record: str | None) -> Path:
    """A run directory as a killed supervisor leaves it: key, state, metrics files."""
    directory = base / name
    (directory / "metrics").mkdir(parents=True, mode=0o700)
    (directory / "metrics" / "counter_123.db").write_bytes(b"\0" * 16)
    (directory / "stack.key").write_text("k\n")
    (directory / "router-state.json").write_text("{}")
    if record is not None:
        (directory / OWNER_FILE).write_text(record)
    return directory


class TestStale:
    """Only an owned directory whose supervisor is gone and whose sockets are dead."""

    def test_dead_owner_is_stale(self, tmp_path: Path) -> None:
        """An owner record naming an exited process: stale."""
        directory = left_behind(tmp_path, "switchboard-a", f"{dead_pid()} 1.00\n")
        assert stale(directory, socket_in_use)

    def test_live_owner_is_not(self, tmp_path: Path) -> None:
        """A record naming this (live) process: not stale."""
        directory = left_behind(tmp_path, "switchboard-a", owner_record(os.getpid()))
        assert not stale(directory, socket_in_use)

    def test_reused_pid_is_stale(self, tmp_path: Path) -> None:
        """A live pid with another start time is another process: stale."""
        directory = left_behind(tmp_path, "switchboard-a", f"{os.getpid()} 12.34\n")
        assert stale(directory, socket_in_use)

    def test_no_owner_file_is_not(self, tmp_path: Path) -> None:
        """No owner file (being created, or an older version's): left alone."""
        assert not stale(left_behind(tmp_path, "switchboard-a", None), socket_in_use)

    def test_garbage_record_is_stale(self, tmp_path: Path) -> None:
        """A record cut short (the writer died writing it) names no live owner."""
        assert stale(left_behind(tmp_path, "switchboard-a", ""), socket_in_use)

    def test_listened_socket_is_not(self, tmp_path: Path) -> None:
        """Someone still listens on a socket file in it: not stale."""
        directory = left_behind(tmp_path, "s", f"{dead_pid()} 1.00\n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(directory / "router-control"))
            listener.listen()
            assert not stale(directory, socket_in_use)
        assert stale(directory, socket_in_use), "a socket file nobody listens on is dead"

    def test_missing_and_files(self, tmp_path: Path) -> None:
        """A vanished path or a plain file: not stale, no error."""
        (tmp_path / "switchboard-file").write_text("x")
        assert not stale(tmp_path / "switchboard-file", socket_in_use)
        assert not stale(tmp_path / "switchboard-gone", socket_in_use)


class TestRemoveStale:
    """remove_stale removes exactly the stale switchboard-* directories."""

    def test_removes_only_stale(self, tmp_path: Path) -> None:
        """Of four directories, only the switchboard-* one with a dead owner goes."""
        dead = f"{dead_pid()} 1.00\n"
        gone = left_behind(tmp_path, "switchboard-dead", dead)
        live = left_behind(tmp_path, "switchboard-live", owner_record(os.getpid()))
        unowned = left_behind(tmp_path, "switchboard-new", None)
        other = left_behind(tmp_path, "other-dead", dead)
        assert remove_stale(tmp_path, socket_in_use) == [gone]
        assert not gone.exists()
        assert live.is_dir() and unowned.is_dir() and other.is_dir()

    def test_missing_base(self, tmp_path: Path) -> None:
        """A base directory that does not exist: nothing to do."""
        assert remove_stale(tmp_path / "nowhere", socket_in_use) == []


@pytest.fixture
def private_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TMPDIR pointed at a short private directory, so temporary run dirs go there."""
    base = Path(tempfile.mkdtemp(prefix="sbl-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", None)  # forget the cached temp dir
    yield base
    monkeypatch.undo()
    tempfile.tempdir = None
    shutil.rmtree(base, ignore_errors=True)


class TestTemporaryRunDirectory:
    """A temporary run directory names its owner, and its start clears leftovers."""

    def test_owner_file_and_sweep(self, private_tmpdir: Path) -> None:
        """open() removes a killed supervisor's directory, makes a new one holding this
        process's owner record; close() removes it."""
        leftover = left_behind(private_tmpdir, "switchboard-old", f"{dead_pid()} 1.00\n")
        run_dir = RunDirectory(None)
        path = run_dir.open()
        assert not leftover.exists()
        assert path.parent == private_tmpdir and path.name.startswith("switchboard-")
        assert (path / OWNER_FILE).read_text() == owner_record(os.getpid())
        assert not stale(path, socket_in_use)
        run_dir.close([])
        assert not path.exists()
