"""One child process of the stack: how to start it, and its life as the supervisor sees it."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from switchboard.supervisor.backoff import RestartBackoff

__all__ = ["Child", "ChildSpec", "ReadyCheck", "Role", "describe_exit"]

#: What a child is; the stack starts roles in this order and stops them in reverse.
Role = Literal["router", "detok-router", "detokenizer", "engine", "worker", "admin"]


@dataclass(frozen=True)
class ReadyCheck:
    """How to tell a child is ready: ``kind`` names a probe, ``target`` its argument.

    ``control``: the control endpoint ``target`` answers ``status``. ``socket``: the
    socket file ``target`` is bound. ``engine``: the router holds a load snapshot.
    ``worker``: worker ``target`` is registered and admitting, and HTTP health is 200.
    ``http``: ``GET target`` (a URL) answers 200.
    """

    kind: Literal["control", "socket", "engine", "worker", "http"]
    target: str = ""


@dataclass(frozen=True)
class ChildSpec:
    """Everything needed to start one child, and the socket files it binds."""

    name: str
    role: Role
    argv: tuple[str, ...]
    ready: ReadyCheck
    socket_files: tuple[Path, ...] = ()
    #: Files of state the child keeps across its own restarts (the router's pause state):
    #: they live as long as the stack, removed when it starts and when it stops.
    state_files: tuple[Path, ...] = ()
    #: The registry id of a worker; None for every other role.
    worker_id: str | None = None
    #: Variables added to this child's environment (the admin app's tokens: never argv).
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


def describe_exit(returncode: int) -> str:
    """``exit status 3`` or ``killed by SIGKILL``, from a Popen return code."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"


@dataclass
class Child:
    """A child the supervisor runs: its spec, current process and restart bookkeeping.

    :meth:`start` launches the spec; the process's stdout and stderr both go to the
    supervisor's stderr, where its lines carry its pid (the supervisor logs which name
    each pid has).
    """

    spec: ChildSpec
    backoff: RestartBackoff
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    #: When a pending restart is due (monotonic); None when none is pending.
    restart_at: float | None = None
    restarts: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def start(self, env: Mapping[str, str]) -> int:
        """Launch a fresh process of the spec; returns its pid.

        Each child gets its own process group so that a Ctrl-C in the terminal reaches
        only the supervisor, which then drains and stops the children in order. Call it
        from the main thread: the kernel's parent-death signal (``--parent-pid``) fires
        when the thread that started the child ends, not only the process.
        """
        self.popen = subprocess.Popen(
            self.spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            env={**env, **self.spec.env},
            process_group=0,
        )
        self.started_at = time.monotonic()
        self.restart_at = None
        return self.popen.pid

    def poll(self) -> int | None:
        """The return code if the current process has exited, else None (also never started)."""
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        """Whether a process of this child is running (not yet reaped)."""
        return self.popen is not None and self.popen.poll() is None

    def uptime(self) -> float:
        """Seconds since the current process started."""
        return time.monotonic() - self.started_at

    def send(self, sig: int) -> None:
        """Send ``sig`` to the current process if it is still running."""
        if self.alive():
            assert self.popen is not None
            # It may exit between the check and the signal.
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)
