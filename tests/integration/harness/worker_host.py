"""A worker host: ``switchboard up --role workers``, run as an operator would, until SIGTERM.

:func:`worker_host` starts it (perhaps in a network namespace of its own, through
``launcher``), waits for its serving line, yields a :class:`WorkerHost`, and at the end
stops it with SIGTERM, failing the test if it outlived its bound, exited non-zero or left
a process behind.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.integration.harness.polling import wait_until
from tests.integration.harness.up_stop import gone, live_descendants, stop_supervisor

__all__ = ["WorkerHost", "worker_host"]

REPO = Path(__file__).resolve().parents[3]
STARTUP_S = 90.0
#: The workers' graceful period (10 s) and the supervisor's margin.
STOP_S = 40.0
_SERVING = re.compile(r"^switchboard: serving (http://\S+) \((\d+) workers? of the stack at ")


@dataclass
class WorkerHost:
    """A running worker host: its supervisor, where it serves and its log."""

    supervisor: subprocess.Popen[bytes]
    base_url: str
    log: Path
    seen: dict[int, psutil.Process]

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def descendants(self) -> list[psutil.Process]:
        """The supervisor's live descendants (remembered for the teardown's check)."""
        return live_descendants(self.supervisor.pid, self.seen)


@contextlib.contextmanager
def worker_host(
    log: Path, up_args: Sequence[str], *, launcher: Sequence[str] = ()
) -> Iterator[WorkerHost]:
    """Run ``switchboard up --role workers`` with ``up_args`` (see the module docstring)."""
    argv = [*launcher, sys.executable, "-m", "switchboard.cli", "up", "--role", "workers"]
    with log.open("wb") as out:
        supervisor = subprocess.Popen(
            [*argv, *up_args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    host = WorkerHost(supervisor, "", log, {})
    problems: list[str] = []
    try:

        def serving() -> re.Match[str] | None:
            if supervisor.poll() is not None:
                raise AssertionError(f"the worker host exited {supervisor.returncode}")
            return next(filter(None, map(_SERVING.match, host.text().splitlines())), None)

        host.base_url = wait_until(serving, STARTUP_S, "the worker host's serving line").group(1)
        host.descendants()
        yield host
    except BaseException:
        print(f"worker host log ({log}):\n{host.text()[-6000:]}")
        raise
    finally:
        host.descendants()
        problems = stop_supervisor(supervisor, host.seen.values(), STOP_S)
        left = [process for process in host.seen.values() if not gone(process)]
        for process in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        if left:
            problems.append(f"processes left running: {left}")
    assert not problems, "\n".join(problems) + f"\n{host.text()[-6000:]}"
