"""This process's CPU time and resident memory, read from the kernel: pure, no sockets.

Every Switchboard process reports both (``docs/metrics.md``, "Processes"): the routers
in their ``metrics`` reply, the processes that write Prometheus's multiprocess files
through :mod:`switchboard.process_export`, the admin app at scrape time. CPU time is
user plus system seconds since the process started (``os.times``); resident memory is
what ``/proc/self/statm`` says now, so a process that freed memory reports less.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["STATM", "cpu_seconds", "resident_bytes"]

#: Where Linux tells a process its memory, in pages: size, resident, shared, ...
STATM: Final = Path("/proc/self/statm")
_PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cpu_seconds() -> float:
    """User plus system CPU seconds this process has used (its threads included)."""
    times = os.times()
    return times.user + times.system


def resident_bytes(statm: Path = STATM) -> int:
    """This process's resident set size in bytes; 0 where the kernel does not say
    (no ``/proc``), so a reading never fails the process that takes it."""
    try:
        fields = statm.read_text(encoding="ascii").split()
        return int(fields[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0
