"""Temporary run directories a killed supervisor left behind, removed by the next start.

A supervisor killed with SIGKILL (``kill -9``, the OOM killer) cannot clean up. Its
children still stop on their own (``PR_SET_PDEATHSIG``) and remove their socket files,
but its temporary run directory stays, holding the stack key, the routers' state files
and ``metrics/`` with the ``prometheus_client`` files of the workers, the engine and the
detokenizers. (A *given* run directory needs nothing here: the next ``switchboard up``
on it replaces the key and wipes the state files and ``metrics/`` before any child
starts.)

So a supervisor writes :data:`OWNER_FILE` (its pid and start time) into each temporary
directory it makes, and before it makes one, :func:`remove_stale` removes every sibling
``switchboard-*`` directory of this user whose owner is gone and on whose socket files
nobody listens. A directory without an owner file (one being created, or made by an
older version) is never touched.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

import psutil

__all__ = ["OWNER_FILE", "PREFIX", "InUse", "owner_record", "remove_stale", "stale"]

log = logging.getLogger("switchboard.supervisor")

#: The file naming the supervisor that made a temporary run directory: ``<pid> <start>``.
OWNER_FILE: Final = "supervisor.pid"
#: How temporary run directories are named (``tempfile.mkdtemp`` prefix).
PREFIX: Final = "switchboard-"


def _started(pid: int) -> str | None:
    """The process's start time as recorded, or None if there is no such process."""
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


def owner_record(pid: int) -> str:
    """What :data:`OWNER_FILE` holds for process ``pid`` (alive): pid and start time, so
    a later process given the same pid is not mistaken for the owner."""
    return f"{pid} {_started(pid)}\n"


def _owner_alive(record: str) -> bool:
    pid_text, _, started = record.strip().partition(" ")
    try:
        pid = int(pid_text)
    except ValueError:
        return False  # not a record we wrote whole: the writer died at once
    return _started(pid) == started


#: Whether a process listens on a socket file (``rundir.socket_in_use``).
InUse = Callable[[Path], bool]


def stale(directory: Path, in_use: InUse) -> bool:
    """Whether ``directory`` is a temporary run directory of this user whose supervisor
    is gone and none of whose files ``in_use`` says is listened on. Never raises for a
    vanished directory."""
    try:
        info = directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        record = (directory / OWNER_FILE).read_text()
        return not _owner_alive(record) and not any(map(in_use, directory.iterdir()))
    except OSError:  # gone meanwhile, no owner file, or not ours to read
        return False


def remove_stale(base: Path, in_use: InUse) -> list[Path]:
    """Remove the stale ``switchboard-*`` directories in ``base`` (see :func:`stale`),
    logging each; return them."""
    removed = []
    try:
        candidates = sorted(base.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for directory in candidates:
        if stale(directory, in_use):
            shutil.rmtree(directory, ignore_errors=True)
            log.info("removed %s, left by a supervisor that was killed", directory)
            removed.append(directory)
    return removed
