"""``switchboard down`` and ``switchboard logs``: find a detached stack by its run dir,
stop it, read its log.

The stack is the one whose supervisor holds the run directory's lock
(:mod:`~switchboard.supervisor.stack_record`); a pid is signalled only while that lock
is held and the pid's process group is the one recorded, so a pid the system has since
given to another process is never touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from pathlib import Path
from typing import TextIO

import psutil

from switchboard.supervisor.rundir import socket_in_use
from switchboard.supervisor.settings import load_settings
from switchboard.supervisor.stack_record import LOCK_FILE, lock_held, read_record

__all__ = ["DEFAULT_DOWN_TIMEOUT_S", "given_run_dir", "remove_dead_sockets", "stop_detached"]

#: How long ``down`` waits after SIGTERM by default: a stop drains the workers (30 s by
#: default), lets their requests finish (10 s) and gives each group 10 s.
DEFAULT_DOWN_TIMEOUT_S = 120.0
#: After SIGKILL, how long the lock has to be dropped before down gives up looking.
_KILL_WAIT_S = 10.0
_POLL_INTERVAL_S = 0.1


def given_run_dir(flag: str | None, config: str | None) -> Path | None:
    """The run dir named by ``--run-dir``, else by ``SWITCHBOARD_RUN_DIR`` or the
    ``--config`` file's ``run_dir`` (as ``up`` reads them); None if none names one.
    :class:`~switchboard.supervisor.settings.SettingsError` for a bad file or variable."""
    if flag is not None:
        return Path(flag).expanduser().resolve()
    path = load_settings({}, config_file=config).run_dir
    return None if path is None else path.expanduser().resolve()


def _group_members(pgid: int) -> list[psutil.Process]:
    """The live processes of process group ``pgid`` (zombies run nothing: left out)."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
    return members


def remove_dead_sockets(run_dir: Path) -> list[Path]:
    """Remove the socket files in ``run_dir`` nobody listens on (left by killed
    processes); those removed."""
    removed = []
    for path in sorted(run_dir.iterdir()):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode) and not socket_in_use(path):
                path.unlink()
                removed.append(path)
    return removed


def _wait_unlocked(run_dir: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while lock_held(run_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL_S)
    return True


def stop_detached(run_dir: Path, timeout_s: float, out: TextIO, err: TextIO) -> int:
    """Stop the detached stack of ``run_dir``: SIGTERM to its supervisor, then wait up to
    ``timeout_s`` for it to finish its own ordered stop; the exit status.

    0 when it stopped in time. 1, said on ``err``: no stack runs from ``run_dir``; its
    record does not match the process holding the lock; or it outlasted the bound, when
    its process group and every process it started are sent SIGKILL and the socket
    files they left are removed (reported).
    """
    if not lock_held(run_dir):
        where = "" if (run_dir / LOCK_FILE).exists() else " (none was ever started there)"
        print(
            f"switchboard down: no stack is running from run dir {run_dir}{where}",
            file=err,
        )
        return 1
    record = read_record(run_dir)
    try:
        same = record is not None and os.getpgid(record.pid) == record.pgid
    except ProcessLookupError:
        same = False
    if record is None or not same:
        print(
            f"switchboard down: run dir {run_dir} is locked by a supervisor whose record "
            "is missing or names another process; not signalling anything",
            file=err,
        )
        return 1
    try:
        started = psutil.Process(record.pid).children(recursive=True)
    except psutil.Error:
        started = []
    began = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
    if _wait_unlocked(run_dir, timeout_s):
        print(
            f"switchboard down: stopped the stack of run dir {run_dir} (supervisor pid "
            f"{record.pid}) in {time.monotonic() - began:.1f} s",
            file=out,
            flush=True,
        )
        return 0
    # Last resort: the supervisor did not finish its stop; nothing it started may outlive it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pgid, signal.SIGKILL)
    for process in started:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _wait_unlocked(run_dir, _KILL_WAIT_S)
    removed = remove_dead_sockets(run_dir)
    left = _group_members(record.pgid)
    print(
        f"switchboard down: the stack of run dir {run_dir} (supervisor pid {record.pid}) "
        f"did not stop within {timeout_s:g} s of SIGTERM: sent SIGKILL to its process group "
        f"{record.pgid} and {len(started)} process(es) it started; removed "
        f"{len(removed)} socket file(s)" + (f"; still running: {left}" if left else ""),
        file=err,
    )
    return 1
