"""Stopping a ``switchboard up`` a test started: one way, for every harness that does.

:func:`stop_supervisor` resumes every process the test saw (one it SIGSTOPped and then
failed before SIGCONT must not turn the drain into a minute-long wait), SIGTERMs the
supervisor if it still runs and waits for it, and returns what went wrong, in words.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterable

import psutil

__all__ = ["stop_supervisor"]


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
