"""The run directory: where every ``ipc://`` socket file of the stack lives, and its key.

A given directory must be private (:func:`router_core.run_dir.check_private`: owned by
this user, mode 0700, not a symbolic link); one that does not exist yet is created so.
Each start of a stack writes a fresh stack key there (:data:`router_core.credentials.KEY_FILE`),
so a key read from an earlier run is worth nothing, and removes it at the end; a stack
across hosts copies its shared key file there instead (``stack_key_file``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from router_core.credentials import KEY_FILE, KeyFileError, new_secret, read_key
from router_core.run_dir import RunDirError, make_private
from switchboard.supervisor.leftovers import OWNER_FILE, PREFIX, owner_record, remove_stale
from switchboard.supervisor.sources import SettingsError

__all__ = ["MAX_IPC_PATH", "RunDirectory", "socket_in_use", "write_fresh_key", "write_key"]

log = logging.getLogger("switchboard.supervisor")

#: Longest ipc socket path the kernel accepts (``sun_path`` is 108 bytes with its NUL).
MAX_IPC_PATH = 107

_SHORT_BASE = "/tmp"  # noqa: S108 (see _temporary_base)
#: Room left for "/switchboard-XXXXXXXX/" and the longest socket file name.
_MAX_BASE_LENGTH = MAX_IPC_PATH - 60


def socket_in_use(path: Path) -> bool:
    """Whether a process listens on the unix socket file ``path`` (False if no such file)."""
    try:
        if not stat.S_ISSOCK(path.lstat().st_mode):
            return False
    except OSError:  # no such file, or a parent that is not a directory
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        return False  # refused: a file left by a process that is gone
    finally:
        probe.close()
    return True


def _temporary_base() -> str | None:
    """Where a temporary run directory goes: the usual place unless its paths get too long.

    Socket paths must stay under :data:`MAX_IPC_PATH`, and some systems set ``TMPDIR``
    to a long per-user path; then ``/tmp`` is used. ``mkdtemp`` makes the directory
    private (mode 0700) either way, so a shared ``/tmp`` exposes nothing.
    """
    if len(tempfile.gettempdir()) <= _MAX_BASE_LENGTH or not Path(_SHORT_BASE).is_dir():
        return None
    return _SHORT_BASE


def write_fresh_key(path: Path) -> None:
    """Put a new stack key in ``path`` (mode 0600), replacing any older one in one step:
    a reader sees the old file or the new one, never a half-written key."""
    write_key(path, new_secret(32))


def write_key(path: Path, key: str) -> None:
    """Put ``key`` in ``path`` (mode 0600) in one step, as :func:`write_fresh_key`."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(f"{key}\n".encode())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


class RunDirectory:
    """A given directory (created if missing, never removed) or a temporary one we own.

    :meth:`open` makes it exist, private, with a fresh stack key in it (:data:`key_file`);
    a temporary one also names its owner, and is made only after the temporary run
    directories killed supervisors left are removed (:mod:`~switchboard.supervisor.leftovers`);
    :meth:`close` removes the key, the socket files named to it that are still there
    (left by a child that was killed) and, for a temporary directory, the directory
    itself.
    """

    def __init__(self, given: Path | None, key_source: Path | None = None) -> None:
        self.given = given
        #: The shared key file copied in at :meth:`open` (None: a fresh key).
        self.key_source = key_source
        self._path: Path | None = None
        self._created = False

    @property
    def path(self) -> Path:
        """The directory; only after :meth:`open`."""
        if self._path is None:
            raise RuntimeError("the run directory is not open")
        return self._path

    @property
    def temporary(self) -> bool:
        """Whether the directory is ours to remove."""
        return self.given is None

    @property
    def key_file(self) -> Path:
        """The stack key's file; only after :meth:`open`."""
        return self.path / KEY_FILE

    def open(self) -> Path:
        """Create the directory (a fresh temporary one unless given) and its stack key;
        return its path. :class:`SettingsError` for a given directory that is not
        private or a ``key_source`` that is no usable key file, ``OSError`` if it cannot
        be created."""
        shared = None
        if self.key_source is not None:
            try:
                shared = read_key(self.key_source)
            except KeyFileError as exc:
                raise SettingsError(f"stack_key_file: {exc}") from None
        if self.given is None:
            base = _temporary_base() or tempfile.gettempdir()
            remove_stale(Path(base), socket_in_use)
            path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
            (path / OWNER_FILE).write_text(owner_record(os.getpid()))
        else:
            try:
                path = make_private(self.given.expanduser()).resolve()
            except RunDirError as exc:
                raise SettingsError(f"run_dir {self.given}: {exc}") from None
        if shared is None:
            write_fresh_key(path / KEY_FILE)
        else:
            write_key(path / KEY_FILE, shared)
        self._path = path
        return path

    def close(self, socket_files: Iterable[Path]) -> None:
        """Remove leftover socket files, then the directory if it is temporary.

        Call once every child has exited. A file someone still listens on is not ours
        (another stack started on the same directory) and is left alone.
        """
        if self._path is None:
            return
        self.key_file.unlink(missing_ok=True)
        for path in socket_files:
            try:
                if stat.S_ISSOCK(path.lstat().st_mode) and not socket_in_use(path):
                    path.unlink()
                    log.debug("removed leftover socket file %s", path)
            except FileNotFoundError:
                continue
        if self.temporary:
            shutil.rmtree(self._path, ignore_errors=True)
        self._path = None
