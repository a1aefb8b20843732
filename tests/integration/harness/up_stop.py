"""Stopping a ``switchboard up`` a test started: one way, for every harness that does.

:func:`stop_supervisor` resumes every process the test saw (one it SIGSTOPped and then
failed before SIGCONT must not turn the drain into a minute-long wait), SIGTERMs the
supervisor if it still runs and waits for it, and returns what went wrong, in words.
:func:`live_descendants` and :func:`gone` are how a harness tracks what it must find
stopped afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterable

import psutil

__all__ = ["gone", "live_descendants", "stop_supervisor"]


def gone(process: psutil.Process) -> bool:
    """Exited (a zombie waiting for its reaper runs nothing and holds no socket)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def live_descendants(pid: int, seen: dict[int, psutil.Process]) -> list[psutil.Process]:
    """``pid``'s live descendants, each also remembered in ``seen`` (by pid), so a
    teardown can check that every one of them is gone."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    seen.update({process.pid: process for process in found})
    return [process for process in found if not gone(process)]


def stop_supervisor(
    supervisor: subprocess.Popen[bytes], seen: Iterable[psutil.Process], stop_s: float
) -> list[str]:
    """Resume ``seen``, SIGTERM ``supervisor`` (if running) and wait up to ``stop_s``
    (then SIGKILL); the problems: it ignored SIGTERM, or exited non-zero on it."""
    for process in seen:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.resume()
    if supervisor.poll() is not None:
        return []
    supervisor.send_signal(signal.SIGTERM)
    try:
        code = supervisor.wait(timeout=stop_s)
    except subprocess.TimeoutExpired:
        supervisor.kill()
        supervisor.wait()
        return [f"switchboard up ignored SIGTERM for {stop_s:.0f} s"]
    return [] if code == 0 else [f"switchboard up exited {code} on SIGTERM"]
