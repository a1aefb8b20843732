"""Which detached stack runs from a run directory: its lock, its record and its log.

A supervisor started by ``switchboard up --detach`` holds an exclusive ``flock`` on
:data:`LOCK_FILE` for as long as it lives and describes itself in :data:`RECORD_FILE`
(its pid, its process group, the *incarnation* token its starter chose, whether it
serves yet and its serving line); its output goes to :data:`LOG_FILE`. The lock is the
proof of life: the kernel drops it when the process ends however it ends, so a record
whose lock nobody holds is stale, and a pid that now names someone else's process is
never signalled. The record's incarnation is how the starter knows that the stack
serving is the one it started, not another already listening on the port.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "LOCK_FILE",
    "LOG_FILE",
    "RECORD_FILE",
    "LockBusy",
    "StackRecord",
    "detached_record",
    "hold_lock",
    "lock_held",
    "read_record",
    "write_record",
]

#: The detached supervisor's files in the run directory.
LOCK_FILE = "supervisor.lock"
RECORD_FILE = "supervisor.json"
LOG_FILE = "supervisor.log"

#: What a record's ``format`` field says, so a future layout is told apart.
_FORMAT = "switchboard-supervisor/1"

State = Literal["starting", "serving"]


class LockBusy(Exception):
    """Another live process holds the run directory's supervisor lock."""


@dataclass(frozen=True)
class StackRecord:
    """One detached supervisor as it describes itself (``serving_line`` empty until
    ``state`` is ``serving``)."""

    pid: int
    pgid: int
    incarnation: str
    state: State = "starting"
    serving_line: str = ""

    def serving(self, line: str) -> StackRecord:
        """This record once the stack serves, with the line it printed."""
        return StackRecord(self.pid, self.pgid, self.incarnation, "serving", line)

    @classmethod
    def from_data(cls, data: Any) -> StackRecord | None:
        """The record ``data`` (decoded JSON) holds, or None if it is not one."""
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return None
        pid, pgid = data.get("pid"), data.get("pgid")
        incarnation, state, line = data.get("incarnation"), data.get("state"), data.get("line")
        if not (isinstance(pid, int) and isinstance(pgid, int) and pid > 0 and pgid > 0):
            return None
        if not isinstance(incarnation, str) or state not in ("starting", "serving"):
            return None
        return cls(pid, pgid, incarnation, state, line if isinstance(line, str) else "")

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["line"] = data.pop("serving_line")
        return {"format": _FORMAT, **data}


def write_record(run_dir: Path, record: StackRecord) -> None:
    """Replace the record in ``run_dir`` in one step (mode 0600): a reader sees the old
    record or the new one, never half of one."""
    path = run_dir / RECORD_FILE
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "w") as out:
            json.dump(record.to_data(), out)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def read_record(run_dir: Path) -> StackRecord | None:
    """The record in ``run_dir``; None if there is none or it cannot be read."""
    try:
        text = (run_dir / RECORD_FILE).read_text()
    except OSError:
        return None
    try:
        return StackRecord.from_data(json.loads(text))
    except ValueError:
        return None


def _open_lock(run_dir: Path) -> int:
    return os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)


def hold_lock(run_dir: Path) -> int:
    """Take the run directory's supervisor lock for the life of this process; the
    descriptor (not inherited by children). :class:`LockBusy` if another holds it."""
    descriptor = _open_lock(run_dir)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(descriptor)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise LockBusy(str(run_dir)) from None
        raise
    return descriptor


def lock_held(run_dir: Path) -> bool:
    """Whether a live process holds ``run_dir``'s supervisor lock now (False when the
    directory or the lock file does not exist)."""
    try:
        descriptor = os.open(run_dir / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(descriptor)  # closing also drops a lock taken just now
    return False


@contextmanager
def detached_record(run_dir: Path, incarnation: str) -> Iterator[Callable[[str], None]]:
    """Be ``run_dir``'s detached supervisor while the block runs: hold its lock, record
    this process as starting under ``incarnation``, and yield the callback that records
    the serving line. On the way out the record is removed, then the lock dropped.
    :class:`LockBusy` (nothing written) if another supervisor holds the lock."""
    descriptor = hold_lock(run_dir)
    record = StackRecord(os.getpid(), os.getpgid(0), incarnation)

    def announce(line: str) -> None:
        write_record(run_dir, record.serving(line))

    try:
        write_record(run_dir, record)
        yield announce
    finally:
        with contextlib.suppress(FileNotFoundError):
            (run_dir / RECORD_FILE).unlink()
        os.close(descriptor)
