"""Running a routing loop as a process: a private umask, stop on SIGTERM/SIGINT, die
with the parent."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from types import FrameType
from typing import Final, Protocol

__all__ = [
    "PRIVATE_UMASK",
    "Service",
    "die_with_parent",
    "serve_until_signalled",
    "use_private_umask",
]

_PR_SET_PDEATHSIG = 1

#: The permission bits every process of a stack keeps off what it creates: all of
#: group's and others'.
PRIVATE_UMASK: Final = 0o077


class Service(Protocol):
    """Anything with a blocking ``run`` and a signal-safe ``request_stop``."""

    def run(self) -> None: ...

    def request_stop(self) -> None: ...


def use_private_umask() -> int:
    """Create every file, directory and socket file from now on for this user alone:
    the umask gains :data:`PRIVATE_UMASK` (bits it already had stay; a stricter umask is
    never loosened). Returns the previous umask.

    Called once at the start of every ``switchboard`` process, so socket files, state
    files, key files and metrics files are private whatever umask the caller had.
    """
    previous = os.umask(PRIVATE_UMASK)
    os.umask(previous | PRIVATE_UMASK)
    return previous


def die_with_parent(expected_parent: int | None = None) -> None:
    """Have the kernel send SIGTERM to this process when its parent dies (Linux).

    If ``expected_parent`` is given and is already gone, exit at once: the parent died
    before the request could be made.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if expected_parent is not None and os.getppid() != expected_parent:
        raise SystemExit(f"parent {expected_parent} is gone")


def serve_until_signalled(service: Service) -> None:
    """Run ``service`` until SIGTERM or SIGINT asks it to stop, then return."""

    def stop(signum: int, frame: FrameType | None) -> None:
        service.request_stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        service.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
