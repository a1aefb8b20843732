"""CURVE key pair files and the authorised-keys file (router_core.curve)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zmq

from router_core.credentials import KeyFileError
from router_core.curve import AuthorisedKeys, decode_key, parse_authorised_keys, valid_public_key
from router_core.curve_files import read_key_pair, write_key_pair


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestKeyPairFiles:
    def test_written_pair_reads_back_and_belongs_together(self, tmp_path: Path) -> None:
        """A generated pair reads back; the secret file is private; the public line names it."""
        secret_path, public_path = write_key_pair(tmp_path, "worker-a")
        pair = read_key_pair(secret_path)
        assert zmq.curve_public(pair.secret.encode()).decode() == pair.public
        assert os.stat(secret_path).st_mode & 0o777 == 0o600
        assert public_path.read_text() == f"{pair.public} worker-a\n"
        assert pair.secret not in repr(pair)

    def test_refuses_to_overwrite(self, tmp_path: Path) -> None:
        """Writing a name twice is refused: a rotation takes a new name."""
        write_key_pair(tmp_path, "a")
        with pytest.raises(FileExistsError):
            write_key_pair(tmp_path, "a")

    def test_refuses_a_name_that_is_a_path(self, tmp_path: Path) -> None:
        """A name with a slash or a space is refused."""
        for name in ("../x", "a b", ""):
            with pytest.raises(ValueError, match="key name"):
                write_key_pair(tmp_path, name)

    def test_secret_readable_by_others_is_refused(self, tmp_path: Path) -> None:
        """A secret file others can read is refused, naming chmod."""
        secret_path, _ = write_key_pair(tmp_path, "a")
        secret_path.chmod(0o644)
        with pytest.raises(KeyFileError, match="chmod 600"):
            read_key_pair(secret_path)

    def test_mismatched_halves_are_refused(self, tmp_path: Path) -> None:
        """A public key that is not the secret's own is refused."""
        secret_path, _ = write_key_pair(tmp_path, "a")
        other = read_key_pair(write_key_pair(tmp_path, "b")[0])
        mine = read_key_pair(secret_path)
        secret_path.write_text(f"public {other.public}\nsecret {mine.secret}\n")
        with pytest.raises(KeyFileError, match="not the secret's own"):
            read_key_pair(secret_path)

    def test_garbage_is_refused(self, tmp_path: Path) -> None:
        """A file that is not two keys is refused, saying what is expected."""
        path = tmp_path / "x.secret"
        path.write_bytes(b"\xff\x00nonsense")
        path.chmod(0o600)
        with pytest.raises(KeyFileError, match="'public <key>'"):
            read_key_pair(path)


class TestParse:
    def test_keys_names_comments_and_blank_lines(self) -> None:
        """Keys are read with their names; comment and blank lines are skipped."""
        one, two = (zmq.curve_keypair()[0].decode() for _ in range(2))
        keys, problems = parse_authorised_keys(f"# hosts\n\n{one} host-a\n  {two}\n")
        assert problems == []
        assert keys == {decode_key(one): "host-a", decode_key(two): two[:8]}

    def test_bad_lines_are_named_by_number(self) -> None:
        """Every bad line is reported with its number."""
        good = zmq.curve_keypair()[0].decode()
        _, problems = parse_authorised_keys(f"{good}\nshort\n{good}x\n")
        assert [p.split(":")[0] for p in problems] == ["line 2", "line 3"]

    def test_decode_matches_zeromq(self) -> None:
        """The pure Z85 decoder agrees with ZeroMQ's on real keys."""
        from zmq.utils import z85

        for _ in range(20):
            public = zmq.curve_keypair()[0].decode()
            assert decode_key(public) == z85.decode(public)
        assert decode_key("#" * 40) is None  # every group above 2**32

    def test_valid_public_key(self) -> None:
        """Only 40 Z85 characters are a key."""
        assert valid_public_key(zmq.curve_keypair()[0].decode())
        assert not valid_public_key("a" * 39)
        assert not valid_public_key("é" * 40)
        assert not valid_public_key('"' * 40)


class TestAuthorisedKeys:
    def _keys(self, path: Path, clock: FakeClock) -> tuple[AuthorisedKeys, list[int]]:
        invalid: list[int] = []
        keys = AuthorisedKeys(
            path, recheck_s=1.0, clock=clock, on_invalid=lambda: invalid.append(1)
        )
        return keys, invalid

    def test_reload_adds_and_revokes_without_restart(self, tmp_path: Path) -> None:
        """An edit is seen after the recheck interval: a key added is let in, one removed is not."""
        one, two = (zmq.curve_keypair()[0].decode() for _ in range(2))
        path = tmp_path / "authorised"
        path.write_text(f"{one} a\n")
        clock = FakeClock()
        keys, _ = self._keys(path, clock)
        keys.load()
        assert keys.name_of(decode_key(one)) == "a"
        assert keys.name_of(decode_key(two)) is None
        path.write_text(f"{two} b\n")
        assert keys.name_of(decode_key(one)) == "a"  # within the interval: not reread
        clock.now = 1.5
        assert keys.name_of(decode_key(one)) is None
        assert keys.name_of(decode_key(two)) == "b"

    def test_bad_edit_authorises_nobody(self, tmp_path: Path) -> None:
        """A bad line after a reload fails closed and is reported once."""
        one = zmq.curve_keypair()[0].decode()
        path = tmp_path / "authorised"
        path.write_text(f"{one}\n")
        clock = FakeClock()
        keys, invalid = self._keys(path, clock)
        keys.load()
        path.write_text(f"{one}\nnot a key\n")
        clock.now = 2.0
        assert keys.name_of(decode_key(one)) is None
        clock.now = 4.0
        assert keys.name_of(decode_key(one)) is None
        assert invalid == [1]
        assert keys.problems == ["line 2: 'not'… is not a 40-character Z85 key"]

    def test_removed_file_authorises_nobody(self, tmp_path: Path) -> None:
        """A deleted file revokes every key."""
        one = zmq.curve_keypair()[0].decode()
        path = tmp_path / "authorised"
        path.write_text(f"{one}\n")
        clock = FakeClock()
        keys, invalid = self._keys(path, clock)
        keys.load()
        path.unlink()
        clock.now = 2.0
        assert keys.name_of(decode_key(one)) is None
        assert invalid == [1]

    def test_load_refuses_a_bad_file(self, tmp_path: Path) -> None:
        """At start a bad or missing file is an error naming it."""
        with pytest.raises(KeyFileError, match="cannot be read"):
            AuthorisedKeys(tmp_path / "missing").load()
