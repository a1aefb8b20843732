"""One child process of the stack: how to start it, and its life as the supervisor sees it."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from switchboard.supervisor.backoff import RestartBackoff

__all__ = ["Child", "ChildSpec", "ReadyCheck", "Role", "describe_exit"]

#: What a child is; the stack starts roles in this order and stops them in reverse.
Role = Literal["router", "gateway", "detok-router", "detokenizer", "engine", "worker", "admin"]


@dataclass(frozen=True)
class ReadyCheck:
    """How to tell a child is ready: ``kind`` names a probe, ``target`` its argument.

    ``control``: the control endpoint ``target`` answers ``status``. ``socket``: the
    socket file ``target`` is bound. ``engine``: the router holds a load snapshot.
    ``worker``: worker ``target`` is registered and admitting, and HTTP health is 200.
    ``http``: ``GET target`` (a URL) answers 200. ``tcp``: something accepts TCP
    connections at ``target`` (``tcp://HOST:PORT``). ``worker-http``: worker ``target``
    has answered 200 to ``/health`` itself (a worker host, which cannot see the router).
    """

    kind: Literal["control", "socket", "engine", "worker", "worker-http", "http", "tcp"]
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
    #: Its working directory; None: the supervisor's.
    cwd: Path | None = None
    #: A user's command line this child runs (an engine command), for messages; its
    #: output then passes through the supervisor, each line prefixed with the child's
    #: name and pid, and the last :data:`TAIL_LINES` lines are kept to say why it exited.
    command: str | None = None
    #: File descriptors the child inherits (the workers' shared listening socket).
    pass_fds: tuple[int, ...] = ()


#: Lines of a command child's output kept for the message when it exits.
TAIL_LINES = 20
#: The longest piece of a command child's output passed on as one line.
LINE_BYTES = 65536


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
    #: The latest output lines of a command child's current process.
    _tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES), repr=False
    )
    _reader: threading.Thread | None = field(default=None, repr=False)

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
        command = self.spec.command is not None
        self.popen = subprocess.Popen(
            self.spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if command else sys.stderr.fileno(),
            stderr=subprocess.STDOUT if command else None,
            env={**env, **self.spec.env},
            cwd=self.spec.cwd,
            process_group=0,
            pass_fds=self.spec.pass_fds,
        )
        self.started_at = time.monotonic()
        self.restart_at = None
        if command:
            assert self.popen.stdout is not None
            # A fresh tail per process: a reader of an earlier one (its output still held
            # open by a leftover) must not write into this one's.
            self._tail = collections.deque(maxlen=TAIL_LINES)
            self._reader = threading.Thread(
                target=self._relay,
                args=(self.popen.stdout, f"{self.name}[{self.popen.pid}]: ".encode(), self._tail),
                name=f"{self.name}-output",
                daemon=True,
            )
            self._reader.start()
        return self.popen.pid

    @staticmethod
    def _relay(stream: IO[bytes], prefix: bytes, tail: collections.deque[str]) -> None:
        """Copy a command child's output to our stderr line by line, keeping the tail;
        a line longer than :data:`LINE_BYTES` is passed on in pieces of that size."""
        with stream:
            for line in iter(lambda: stream.readline(LINE_BYTES), b""):
                text = line.rstrip(b"\n")
                tail.append(text.decode("utf-8", errors="replace"))
                with contextlib.suppress(OSError):
                    os.write(sys.stderr.fileno(), prefix + text + b"\n")

    def last_lines(self, wait_s: float = 1.0) -> list[str]:
        """The last lines a command child's current process wrote (stdout and stderr),
        once its output has ended (waiting up to ``wait_s``)."""
        if self._reader is not None:
            self._reader.join(wait_s)
        return list(self._tail)

    def exit_context(self, wait_s: float = 1.0) -> str:
        """For a command child: its command line and last output lines (waiting up to
        ``wait_s`` for its output to end), to follow a message about it; "" for every
        other child."""
        if self.spec.command is None:
            return ""
        lines = self.last_lines(wait_s)
        shown = "".join(f"\n    {line}" for line in lines) if lines else " (none)"
        return f"; command: {self.spec.command}; its last output lines:{shown}"

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
        """Send ``sig`` to the current process's group if the process is still running:
        its own children too (an engine command run through ``sh -c``)."""
        if self.alive():
            assert self.popen is not None
            # It may exit between the check and the signal.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)

    def sweep(self) -> None:
        """SIGKILL whatever is left of the process group once the process has exited
        (a command's own children), so that nothing of it outlives the stack."""
        if self.popen is not None and self.popen.poll() is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
