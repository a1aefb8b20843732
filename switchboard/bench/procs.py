"""The process harness of a benchmark trial.

Every child runs in a :class:`ProcessGroup` that always stops it (SIGTERM, then SIGKILL)
and every trial runs in its own temporary directory that is always removed. Children
ignore SIGINT, so a Ctrl-C reaches only the parent, which then stops the group; if the
parent dies anyway, the kernel sends each child SIGTERM (``die_with_parent``).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from router_core.process import die_with_parent

__all__ = [
    "CONTEXT",
    "BenchError",
    "ProcessGroup",
    "Report",
    "log_tail",
    "trial_dir",
    "wait_for_path",
]

#: ``fork``: children inherit the imported modules and start in milliseconds. The parent
#: never creates a ZeroMQ context, so no socket state is inherited.
CONTEXT: Final = multiprocessing.get_context("fork")

#: How long a child may take to start and report ``ready``.
READY_TIMEOUT_S: Final = 15.0

#: How long a stopped child may take to exit before it is killed.
STOP_TIMEOUT_S: Final = 5.0

#: The pipe end a child reports on: ``(tag, value)`` tuples, e.g. ``("ready", None)``.
Report = Connection


class BenchError(RuntimeError):
    """A trial that could not complete: a child died, hung, or reported an error."""


def _bootstrap(
    parent_pid: int, target: Callable[..., None], report: Report, args: tuple[Any, ...]
) -> None:
    # Ctrl-C goes to the whole foreground process group; only the parent acts on it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM ends a child at once: it holds nothing the kernel does not release, and
    # the parent removes its socket files. (The router installs its own graceful stop.)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)
    try:
        target(report, *args)
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        report.close()


class ProcessGroup:
    """Child processes started together and stopped together on exit."""

    def __init__(self) -> None:
        self._children: list[tuple[BaseProcess, Connection]] = []

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, name: str, target: Callable[..., None], *args: Any) -> Connection:
        """Run ``target(report, *args)`` in a child; return the end to read its reports."""
        reader, writer = CONTEXT.Pipe(duplex=False)
        proc = CONTEXT.Process(
            target=_bootstrap, args=(os.getpid(), target, writer, args), name=name, daemon=True
        )
        self._children.append((proc, reader))
        try:
            proc.start()
        finally:
            # Only the child may hold the writing end, so its death reads as EOF here.
            writer.close()
        return reader

    def expect(self, reader: Connection, tag: str, timeout_s: float = READY_TIMEOUT_S) -> Any:
        """Wait for the child behind ``reader`` to report ``tag``; return the value."""
        name = self._name_of(reader)
        if not reader.poll(timeout_s):
            raise BenchError(f"{name}: no {tag!r} report within {timeout_s:.0f} s")
        try:
            got, value = reader.recv()
        except EOFError:
            raise BenchError(f"{name}: exited before reporting {tag!r}") from None
        if got == "error":
            raise BenchError(f"{name}: {value}")
        if got != tag:
            raise BenchError(f"{name}: reported {got!r}, expected {tag!r}")
        return value

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Terminate every child still running, kill any that outlive ``timeout_s``."""
        children, self._children = self._children, []
        started = [proc for proc, _ in children if proc.pid is not None]
        try:
            for proc in started:
                if proc.exitcode is None:
                    proc.terminate()
            deadline = time.monotonic() + timeout_s
            for proc in started:
                proc.join(max(0.0, deadline - time.monotonic()))
        finally:
            # Reached even if a second Ctrl-C cut the polite stop short.
            for proc in started:
                if proc.exitcode is None:
                    proc.kill()
                    proc.join()
                proc.close()
            for _, reader in children:
                reader.close()

    def _name_of(self, reader: Connection) -> str:
        for proc, candidate in self._children:
            if candidate is reader:
                return proc.name
        return "child"


def wait_for_path(path: str | Path, what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll until ``path`` exists (a socket file a child binds), or raise BenchError."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: {path} did not appear within {timeout_s:.0f} s")
        time.sleep(0.002)


@contextmanager
def trial_dir(root: str | Path | None = None, prefix: str = "t-") -> Iterator[Path]:
    """A fresh directory for one trial's ``ipc://`` socket files, removed afterwards.

    Keep ``root`` short: a socket path may not exceed 107 bytes (``sun_path``).
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def log_tail(log: IO[bytes] | None, lines: int = 8) -> str:
    """The last ``lines`` lines of a subprocess's log file, joined with `` | ``."""
    if log is None:
        return ""
    log.seek(0)
    text = log.read().decode(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) or "(no output)"
