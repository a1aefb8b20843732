"""The stack key file (``router_core.credentials``): created once, private, refused otherwise."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from router_core.credentials import (
    KEY_FILE,
    MIN_KEY_LENGTH,
    KeyFileError,
    load_or_create,
    matches,
    new_secret,
    read_key,
    resolve_key,
)
from tests.support.private_dirs import foreign_directory

#: Processes racing to create one key.
RACERS = 8


def _create(directory: str) -> str:
    return load_or_create(Path(directory) / KEY_FILE)


class TestLoadOrCreate:
    def test_creates_a_private_key(self, tmp_path: Path) -> None:
        """A missing key file is created 0600 with 64 hex digits, whatever the umask."""
        previous = os.umask(0)
        try:
            key = load_or_create(tmp_path / KEY_FILE)
        finally:
            os.umask(previous)
        assert len(key) == 64 and int(key, 16) >= 0
        assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
        assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary left

    def test_an_existing_key_is_kept(self, tmp_path: Path) -> None:
        """A second call reads the key the first one wrote."""
        assert load_or_create(tmp_path / KEY_FILE) == load_or_create(tmp_path / KEY_FILE)

    def test_racing_processes_agree(self, tmp_path: Path) -> None:
        """Processes creating the key at once all end up with the same one."""
        with multiprocessing.get_context("spawn").Pool(RACERS) as pool:
            keys = pool.map(_create, [str(tmp_path)] * RACERS)
        assert len(set(keys)) == 1
        assert read_key(tmp_path / KEY_FILE) == keys[0]
        assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]


class TestReadKey:
    def test_refuses_a_readable_file(self, tmp_path: Path) -> None:
        """A key others may read is refused, naming the file and the chmod that fixes it."""
        path = tmp_path / KEY_FILE
        load_or_create(path)
        path.chmod(0o640)
        with pytest.raises(KeyFileError, match=r"mode 0640 .*chmod 600"):
            read_key(path)
        with pytest.raises(KeyFileError):
            load_or_create(path)  # not replaced either: someone else's mistake to see

    def test_refuses_a_symlink(self, tmp_path: Path) -> None:
        """A key file that is a symbolic link is refused (not followed)."""
        real = tmp_path / "real.key"
        load_or_create(real)
        (tmp_path / KEY_FILE).symlink_to(real)
        with pytest.raises(KeyFileError, match=KEY_FILE):
            read_key(tmp_path / KEY_FILE)
        with pytest.raises(KeyFileError):
            load_or_create(tmp_path / KEY_FILE)

    @pytest.mark.parametrize(
        "content",
        [b"", b"short\n", b"\xff" * 40, b"a" * 20 + b"\x1b" + b"a" * 20, b"a" * 2000],
        ids=["empty", "short", "not-ascii", "control-character", "too-long"],
    )
    def test_refuses_what_is_not_a_key(self, tmp_path: Path, content: bytes) -> None:
        """An empty, short, non-ASCII, unprintable or overlong key is refused."""
        path = tmp_path / KEY_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(descriptor, content)
        os.close(descriptor)
        with pytest.raises(KeyFileError, match=str(path)):
            read_key(path)

    def test_accepts_a_hand_written_key(self, tmp_path: Path) -> None:
        """A private file with one line of at least 32 printable characters is a key."""
        path = tmp_path / "given.key"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(descriptor, b"k" * MIN_KEY_LENGTH + b"\n")
        os.close(descriptor)
        assert read_key(path) == "k" * MIN_KEY_LENGTH

    def test_refuses_another_users_file(self, tmp_path: Path) -> None:
        """A key file owned by another user is refused (needs root to hand it over)."""
        theirs = foreign_directory(tmp_path / "theirs")
        path = theirs / KEY_FILE
        load_or_create(path)
        owner = theirs.stat().st_uid
        os.chown(path, owner, -1)
        with pytest.raises(KeyFileError, match=f"owned by uid {owner}, not by this user"):
            read_key(path)


class TestResolveKey:
    def test_key_file_first(self, tmp_path: Path) -> None:
        """--key-file wins over the run directory, and must exist."""
        given = tmp_path / "given.key"
        key = load_or_create(given)
        assert resolve_key(given, tmp_path) == key
        assert not (tmp_path / KEY_FILE).exists()
        with pytest.raises(KeyFileError, match="no such file"):
            resolve_key(tmp_path / "missing.key", tmp_path)

    def test_run_dir_then_none(self, tmp_path: Path) -> None:
        """Without --key-file the run dir's key is used (created); with neither, none."""
        key = resolve_key(None, tmp_path)
        assert key == read_key(tmp_path / KEY_FILE)
        assert resolve_key(None, None) is None


class TestSecrets:
    def test_matches(self) -> None:
        """Only the same key matches; a lone surrogate compares false, never raises."""
        key = new_secret(32)
        assert matches(key, key)
        assert not matches(key[:-1], key)
        assert not matches("\ud800", key)
        assert new_secret() != new_secret() and len(new_secret()) == 32
