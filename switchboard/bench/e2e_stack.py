"""One ``switchboard up`` stack for the end-to-end benchmark: started, sampled, always stopped.

The stack runs as one subprocess, the supervisor, in its own session (a Ctrl-C reaches
only the benchmark, which then stops it) and with a parent-death signal: if the
benchmark is killed outright, the supervisor gets SIGTERM and stops its children, which
die with it in turn. The supervisor owns its temporary run directory, so it removes it
in that case too; the benchmark keeps nothing on disk (the stack's log is an unlinked
temporary file). Its processes are found as the supervisor's descendants and classified
by command line.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from router_core.process import die_with_parent
from switchboard.bench.e2e_stats import CpuSample, role_of
from switchboard.bench.procs import BenchError, log_tail

if TYPE_CHECKING:
    import psutil

__all__ = ["HOST", "Stack", "StackConfig", "free_port", "run_dir_of"]

HOST: Final = "127.0.0.1"

#: The supervisor's first line on stdout once every child is ready.
_SERVING_PREFIX: Final = "switchboard: serving "
_RUN_DIR: Final = re.compile(r"run dir (\S+?);")

#: Waits between checks for an interruption while the stack starts.
_POLL_S: Final = 0.2


@dataclass(frozen=True)
class StackConfig:
    """The stack settings the benchmark varies or pins (everything else: defaults)."""

    workers: int
    detokenizers: int = 2
    step_time_s: float = 0.005
    max_running_requests: int = 256
    startup_timeout_s: float = 60.0
    #: Short: the load is stopped before the stack, so there is nothing to drain.
    drain_timeout_s: float = 5.0
    graceful_timeout_s: float = 2.0
    stop_timeout_s: float = 10.0
    #: Metrics (prometheus_client in workers) on, as ``switchboard up`` defaults.
    metrics: bool = True
    #: Where the stack exports traces (``--otlp-endpoint``); empty: tracing off.
    otlp_endpoint: str = ""
    #: Extra environment for the stack (``OTEL_TRACES_SAMPLER`` and the like).
    env: tuple[tuple[str, str], ...] = ()
    #: The configuration's name in reports; default ``1 worker``, ``2 workers``.
    name: str = ""
    #: Another engine's settings (``--engine llama-cpp --model ...``) in place of the
    #: simulation's step time, token cost and running requests.
    engine_args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The name, or ``1 worker``, ``2 workers``."""
        return self.name or f"{self.workers} worker{'' if self.workers == 1 else 's'}"


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def run_dir_of(cmdline: list[str]) -> Path | None:
    """The ``--run-dir`` a stack child was started with, if any."""
    for flag, value in itertools.pairwise(cmdline):
        if flag == "--run-dir":
            return Path(value)
    return None


class Stack:
    """A ``switchboard up`` subprocess. Nothing runs before :meth:`launch`; :meth:`stop`
    is idempotent and leaves no process and no run directory behind.

    ``tmpdir`` becomes the supervisor's ``TMPDIR``, where it makes its run directory.
    """

    def __init__(self, config: StackConfig, tmpdir: str | Path | None = None) -> None:
        self.config = config
        self.port = 0
        self.admin_port = 0
        #: Seconds from launch to the serving line, and from SIGTERM to the last exit.
        self.start_s = 0.0
        self.stop_s = 0.0
        self._launched_at = 0.0
        self._tmpdir = tmpdir
        self._log: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._run_dir: Path | None = None
        #: Every process of the stack seen so far, with its role; kept after the
        #: supervisor exits so that :meth:`stop` can end any that outlive it.
        self._known: dict[int, tuple[psutil.Process, str]] = {}

    def argv(self, port: int, admin_port: int) -> list[str]:
        """The supervisor's command line."""
        c = self.config
        return [
            sys.executable,
            *("-m", "switchboard.cli", "up"),
            *("--workers", str(c.workers), "--detokenizers", str(c.detokenizers)),
            *("--host", HOST, "--port", str(port), "--admin-port", str(admin_port)),
            *("--log-level", "WARNING"),
            *(c.engine_args or self._sim_args()),
            *("--startup-timeout-s", repr(c.startup_timeout_s)),
            *("--drain-timeout-s", repr(c.drain_timeout_s)),
            *("--graceful-timeout-s", repr(c.graceful_timeout_s)),
            *("--stop-timeout-s", repr(c.stop_timeout_s)),
            *(() if c.metrics else ("--no-metrics",)),
            *(("--otlp-endpoint", c.otlp_endpoint) if c.otlp_endpoint else ()),
        ]

    def _sim_args(self) -> tuple[str, ...]:
        c = self.config
        return (
            *("--step-time-s", repr(c.step_time_s), "--per-token-cost-s", "0.0"),
            *("--max-running-requests", str(c.max_running_requests)),
        )

    def launch(self) -> None:
        """Start the supervisor without waiting for it (see :meth:`wait_serving`)."""
        parent = os.getpid()
        env = {**os.environ, **dict(self.config.env)}
        if self._tmpdir is not None:
            env["TMPDIR"] = str(self._tmpdir)
        self.port, self.admin_port = free_port(), free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self._launched_at = time.monotonic()
        self._proc = subprocess.Popen(
            self.argv(self.port, self.admin_port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(parent),  # noqa: PLW1509 (no threads yet)
        )

    def wait_serving(self, interrupted: Callable[[], bool] = lambda: False) -> None:
        """Block until the supervisor prints its serving line; BenchError if it fails."""
        proc = self._running()
        assert proc.stdout is not None
        # The supervisor enforces its own startup timeout; this only guards against a hang.
        limit_s = self.config.startup_timeout_s + 5.0
        deadline = self._launched_at + limit_s
        while True:
            if interrupted():
                raise KeyboardInterrupt
            readable, _, _ = select.select([proc.stdout], [], [], _POLL_S)
            if readable:
                line = proc.stdout.readline().decode(errors="replace")
                if line.startswith(_SERVING_PREFIX):
                    self.start_s = time.monotonic() - self._launched_at
                    found = _RUN_DIR.search(line)
                    if found:
                        self._run_dir = Path(found.group(1))
                    self._remember_processes()
                    return
                if not line:
                    proc.wait()
                    raise BenchError(f"switchboard up exited ({proc.returncode}): {self._tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"switchboard up: not serving after {limit_s:.0f} s")

    def cpu_sample(self) -> dict[int, CpuSample]:
        """Cumulative CPU seconds (user + system) of the supervisor and every descendant."""
        import psutil

        self._remember_processes()
        sample = {}
        for pid, (proc, role) in self._known.items():
            try:
                times = proc.cpu_times()
                sample[pid] = CpuSample(role, times.user + times.system)
            except psutil.Error:
                continue  # exited: reported as unmatched by cpu_by_role
        return sample

    def roles(self) -> dict[str, int]:
        """How many processes of each role the stack has been seen with."""
        counts: dict[str, int] = {}
        for _, role in self._known.values():
            counts[role] = counts.get(role, 0) + 1
        return counts

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> None:
        """SIGTERM the supervisor and wait for it (SIGKILL after its own stop budget), then
        end any descendant still running and remove a run directory it left behind.
        ``hurry`` (a second Ctrl-C) cuts the waiting short."""
        proc, self._proc = self._proc, None
        if proc is None:
            return  # never launched, or stopped already
        began = time.monotonic()
        try:
            self._remember_processes(proc)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            c = self.config
            budget = c.drain_timeout_s + c.graceful_timeout_s + 2 * c.stop_timeout_s
            deadline = time.monotonic() + budget
            while proc.poll() is None and time.monotonic() < deadline and not hurry():
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
            self._end_leftovers(proc.pid)
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._run_dir is not None:
                # Only there if the supervisor could not remove it (it was killed).
                shutil.rmtree(self._run_dir, ignore_errors=True)
                self._run_dir = None
            self.stop_s = time.monotonic() - began

    def _end_leftovers(self, supervisor: int) -> None:
        """Terminate, then kill, every known process of the stack that is still running."""
        import psutil

        leftovers = [proc for proc, _ in self._known.values() if proc.pid != supervisor]
        self._known = {}
        for proc in leftovers:
            try:
                proc.terminate()  # psutil checks the pid was not reused since we saw it
            except psutil.Error:
                continue
        _, alive = psutil.wait_procs(leftovers, timeout=3.0)
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                continue
        psutil.wait_procs(alive, timeout=3.0)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the stack is not launched")
        return self._proc

    def _remember_processes(self, proc: subprocess.Popen[bytes] | None = None) -> None:
        """Add the supervisor and its current descendants to the processes we know of."""
        import psutil

        proc = proc or self._proc
        if proc is None:
            return
        try:
            known = self._known.get(proc.pid)
            supervisor = known[0] if known else psutil.Process(proc.pid)
            family = [supervisor, *supervisor.children(recursive=True)]
        except psutil.Error:
            return  # the supervisor is gone: its descendants are the ones known already
        for member in family:
            if member.pid not in self._known:
                try:
                    cmdline = member.cmdline()
                except psutil.Error:
                    continue  # exited since it was listed
                self._known[member.pid] = (member, role_of(cmdline))
                if self._run_dir is None:
                    self._run_dir = run_dir_of(cmdline)

    def _tail(self) -> str:
        return log_tail(self._log)
