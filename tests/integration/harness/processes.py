"""Processes a test spawns: each in its own session, stopped and checked at teardown."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.integration.harness.polling import REPO_ROOT, child_env

__all__ = ["ManagedProcess", "ProcessManager"]


@dataclass
class ManagedProcess:
    """A spawned process, its log, and the socket files it binds and must remove."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    binds: list[Path] = field(default_factory=list)
    #: False once the test kills it on purpose: its exit status and files are not checked.
    expect_clean_exit: bool = True
    stopped_by_sigterm: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def assert_running(self) -> None:
        """Fail at once, with its log, if the process has exited."""
        code = self.popen.poll()
        if code is not None:
            raise AssertionError(f"{self.name} exited with {code}:\n{self.log_tail()}")

    def send_signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL and reap; its exit status and leftover files are then not checked."""
        self.expect_clean_exit = False
        self.send_signal(signal.SIGCONT)
        self.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def terminate(self, timeout: float = 5.0) -> int:
        """SIGTERM (resuming it if stopped) and wait; returns the exit status."""
        self.stopped_by_sigterm = True
        self.send_signal(signal.SIGCONT)
        self.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)


class ProcessManager:
    """Spawns processes (new session, dying with this one) and stops them all at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: list[ManagedProcess] = []

    def spawn(
        self,
        name: str,
        argv: list[str],
        binds: Iterable[Path] = (),
        env: dict[str, str] | None = None,
    ) -> ManagedProcess:
        """Start ``argv`` logging to ``<log dir>/<name>.log``; ``env`` defaults to the tests'."""
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=child_env() if env is None else env,
                start_new_session=True,
            )
        proc = ManagedProcess(name, popen, log_path, list(binds))
        self.processes.append(proc)
        return proc

    def shutdown(self) -> list[str]:
        """Stop everything (newest first) and return what went wrong."""
        problems: list[str] = []
        for proc in reversed(self.processes):
            if proc.alive():
                try:
                    code = proc.terminate(timeout=5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    problems.append(f"{proc.name} ignored SIGTERM for 5 s and was killed")
                    continue
                if code != 0 and proc.expect_clean_exit:
                    problems.append(f"{proc.name} exited {code} on SIGTERM:\n{proc.log_tail()}")
            elif proc.expect_clean_exit and not proc.stopped_by_sigterm:
                problems.append(
                    f"{proc.name} exited by itself with {proc.popen.returncode}:\n{proc.log_tail()}"
                )
            if proc.expect_clean_exit and proc.stopped_by_sigterm and proc.popen.returncode == 0:
                leftover = [str(p) for p in proc.binds if p.exists()]
                if leftover:
                    problems.append(f"{proc.name} left socket files after SIGTERM: {leftover}")
            for path in proc.binds:
                if not proc.expect_clean_exit:
                    path.unlink(missing_ok=True)
        children = psutil.Process().children(recursive=True)
        if children:
            problems.append(f"child processes left running: {children}")
            for child in children:
                child.kill()
            psutil.wait_procs(children, timeout=5)
        return problems

    def dump_logs(self) -> str:
        return "\n".join(
            f"----- {proc.name} (pid {proc.pid}, exit {proc.popen.poll()})\n{proc.log_tail(60)}"
            for proc in self.processes
        )
