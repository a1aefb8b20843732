"""The engine under check as a child process, started as the supervisor starts it.

The argv and the environment come from :mod:`switchboard.supervisor.engine_command`
(the placeholders and the ``SWITCHBOARD_ENGINE_*`` / ``SWITCHBOARD_*`` variables of the
issue-22 contract), on top of engine-check's own environment. As the supervisor does,
the command is run through :mod:`switchboard.supervisor.engine_exec` (the kernel's
parent-death signal set to SIGKILL, then ``exec``: the engine keeps the pid) in a
process group of its own. Its stdout and stderr go to a file whose last lines a
finding can quote, and it is stopped with SIGTERM to the group, SIGKILL after a bound.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from switchboard.supervisor.engine_command import exec_argv
from switchboard.supervisor.layout import child_environment

__all__ = ["STOP_TIMEOUT_S", "EngineProcess"]

#: Seconds between SIGTERM and SIGKILL when the engine is stopped.
STOP_TIMEOUT_S: Final = 5.0


class EngineProcess:
    """One engine command: :meth:`start` it, :meth:`kill` or :meth:`stop` it, read its log."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path
    ) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped_status: int | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        """Start the command (again, after :meth:`kill`); OSError if it cannot run."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 -- closed in stop()/kill()
        self._process = subprocess.Popen(
            exec_argv(os.getpid(), self.argv),
            cwd=self.cwd,
            # As the supervisor's children get it: no SWITCHBOARD_* setting, unbuffered.
            env={**child_environment(os.environ), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            process_group=0,
        )

    @property
    def pid(self) -> int | None:
        """The running engine's pid (its process group's id too)."""
        return self._process.pid if self._process is not None else None

    def exit_status(self) -> int | None:
        """The exit status if the engine has exited (or was stopped), else None."""
        if self._process is None:
            return self._stopped_status
        return self._process.poll()

    def _signal_group(self, signum: int) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signum)

    def kill(self) -> None:
        """SIGKILL the engine's process group and reap it."""
        if self._process is None:
            return
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=STOP_TIMEOUT_S)
        self._close_log()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the group; SIGKILL it if the engine has not exited within ``timeout_s``."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=timeout_s)
        # The group may hold children of the engine that outlive it: end them too, at
        # once (the group's id is the engine's pid, which is not signalled again later).
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=timeout_s)
        self._stopped_status = self._process.returncode
        self._process = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def last_lines(self, count: int = 3) -> str:
        """The engine's last ``count`` lines of output, joined by `` | `` ("" if none)."""
        try:
            text = self.log_path.read_bytes()[-4096:].decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-count:])
