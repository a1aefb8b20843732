"""The stack key: the one secret every local peer of a stack presents.

A stack keeps its key in ``<run dir>/stack.key`` (:data:`KEY_FILE`), a file of one line
(64 hex digits) readable by its owner only. Whoever starts first in a run directory
creates it (:func:`load_or_create`): the key is written to a temporary file and *linked*
into place, so two processes starting together agree on one key and no reader ever sees
a half-written file. Every peer then proves it belongs to the stack by sending the key
(registrations, control requests, beacons, the engine's acknowledgements and load
snapshots); a router compares with :func:`matches`, in constant time.

A key file is refused (:class:`KeyFileError`, one line naming the file and the fix) when
it is not a regular file, not owned by the current user, readable or writable by group
or others, or does not hold a key; a key someone else could read is no secret.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Final

__all__ = [
    "KEY_FILE",
    "MIN_KEY_LENGTH",
    "KeyFileError",
    "check_private",
    "load_or_create",
    "matches",
    "new_secret",
    "read_key",
    "resolve_key",
]

#: The key file's name in a run directory.
KEY_FILE: Final = "stack.key"
#: The shortest key accepted from a file (a generated key has 64 characters).
MIN_KEY_LENGTH: Final = 32
_MAX_KEY_LENGTH: Final = 1024


class KeyFileError(Exception):
    """A key file that cannot be used; the message names the file and what is wrong."""


def new_secret(nbytes: int = 16) -> str:
    """A fresh random secret, as hex (a per-registration secret, say)."""
    return secrets.token_hex(nbytes)


def matches(given: str, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def check_private(path: Path, info: os.stat_result) -> None:
    """Raise :class:`KeyFileError` unless ``info`` is a regular file of this user that
    nobody else may read or write."""
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"key file {path}: not a regular file")
    if info.st_uid != os.geteuid():
        raise KeyFileError(f"key file {path}: owned by uid {info.st_uid}, not by this user")
    if info.st_mode & 0o077:
        raise KeyFileError(
            f"key file {path}: mode {stat.S_IMODE(info.st_mode):04o} lets others read it "
            f"(chmod 600 {path})"
        )


def read_key(path: Path) -> str:
    """The key in ``path``; :class:`KeyFileError` if it is missing, not private or empty."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise KeyFileError(f"key file {path}: no such file") from None
    except OSError as exc:
        raise KeyFileError(f"key file {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        check_private(path, os.fstat(handle.fileno()))
        raw = handle.read(_MAX_KEY_LENGTH + 1)
    try:
        key = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise KeyFileError(f"key file {path}: not ASCII text") from None
    if len(key) < MIN_KEY_LENGTH or len(key) > _MAX_KEY_LENGTH or not key.isprintable():
        raise KeyFileError(
            f"key file {path}: expected one line of {MIN_KEY_LENGTH} to {_MAX_KEY_LENGTH} "
            "printable characters"
        )
    return key


def load_or_create(path: Path) -> str:
    """The key in ``path``, creating the file with a new key if there is none yet.

    Safe when several processes start at once: the new key is linked into place, which
    fails if another process got there first, and then that process's key is read.
    """
    try:
        return read_key(path)
    except KeyFileError:
        if path.exists() or path.is_symlink():
            raise
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(f"{secrets.token_hex(32)}\n".encode())
            out.flush()
            os.fsync(out.fileno())
        # Fails if another process created it first: then its key is the one read.
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return read_key(path)


def resolve_key(key_file: str | Path | None, run_dir: str | Path | None) -> str | None:
    """The key a process uses: ``key_file`` if given (it must exist), else the run
    directory's (created if missing), else None (no run directory: no key)."""
    if key_file is not None:
        return read_key(Path(key_file))
    if run_dir is not None:
        return load_or_create(Path(run_dir) / KEY_FILE)
    return None
