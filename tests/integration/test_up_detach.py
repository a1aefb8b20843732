"""``switchboard up --detach``, ``logs`` and ``down`` on a real stack: returns only once
serving, refuses a second stack on the same run dir or ports naming the cause, names a
failing engine, ``logs`` prints and follows (quiet into ``head``), and ``down`` leaves no
process and no socket file.

Each test owns its run dir and free loopback ports; teardown stops whatever a test left
running (``down``, then SIGKILL of anything it saw) and fails the test if it had to.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from switchboard.supervisor.stack_record import LOG_FILE, lock_held, read_record
from tests.integration.harness import socket_files, wait_until
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT
from tests.integration.harness.supervisor import STARTUP_S, generate, gone, stack_env

pytestmark = pytest.mark.integration

#: Bound on one ``up --detach``: the stack's startup plus the first tokenizer training.
UP_S = STARTUP_S + 120.0
#: Bound on every other command.
COMMAND_S = 120.0
PID = re.compile(r"supervisor pid (\d+)")


@dataclass
class Detached:
    """One test's run dir, ports and the processes its stacks started."""

    run_dir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    admin_port: int = field(default_factory=free_port)
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    def switchboard(
        self, *words: str, timeout: float = COMMAND_S
    ) -> subprocess.CompletedProcess[str]:
        """``switchboard WORDS`` run to its end (bounded), its output captured."""
        return subprocess.run(
            [sys.executable, "-m", "switchboard.cli", *words],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def up(self, *arguments: str, run_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``up --detach`` on this test's ports and run dir (or ``run_dir``)."""
        where = str(run_dir or self.run_dir)
        ports = ("--port", str(self.port), "--admin-port", str(self.admin_port))
        return self.switchboard(
            "up", "--detach", "--run-dir", where, *ports, *arguments, timeout=UP_S
        )

    def remember(self, pid: int) -> list[psutil.Process]:
        """The supervisor ``pid`` and its live descendants, remembered for teardown."""
        found = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        self.seen.update({process.pid: process for process in found})
        return found

    def group_members(self, pgid: int) -> list[int]:
        """The pids still running (not zombies) in process group ``pgid``."""
        members = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(process.pid) == pgid and not gone(process):
                    members.append(process.pid)
        return members


@pytest.fixture
def detached(cache_dir: Path) -> Iterator[Detached]:
    """A short private run dir and free ports; teardown stops and checks everything."""
    run_dir = Path(tempfile.mkdtemp(prefix="sb-dt-", dir="/tmp"))
    owner = Detached(run_dir, stack_env(cache_dir))
    yield owner
    problems = []
    if lock_held(run_dir):
        owner.switchboard("down", "--run-dir", str(run_dir))
        problems.append("a stack was still running at teardown")
    left = [process for process in owner.seen.values() if not gone(process)]
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    if left:
        problems.append(f"processes left running: {left}")
    sockets = socket_files(run_dir)
    if sockets:
        problems.append(f"socket files left in the run dir: {sockets}")
    shutil.rmtree(run_dir, ignore_errors=True)
    assert not problems, "\n".join(problems)


class TestUpDetach:
    """``up --detach`` returns once serving; ``logs`` prints; ``down`` stops everything."""

    def test_serving_refusals_logs_and_down(self, detached: Detached, tmp_path: Path) -> None:
        """0 only once serving; a second stack on the run dir or ports is refused, named;
        logs prints and follows; down leaves no process in the group and no socket file."""
        started = detached.up("--workers", "2")
        assert started.returncode == 0, started.stderr
        found = PID.search(started.stdout)
        assert found is not None, started.stdout
        pid = int(found.group(1))
        assert started.stdout.startswith(f"switchboard: serving http://127.0.0.1:{detached.port} ")
        assert f"run dir {detached.run_dir}" in started.stdout
        # Serving as it returns: no wait before these.
        url = f"http://127.0.0.1:{detached.port}"
        assert generate(url, timeout=30).status_code == 200
        admin_url = f"http://127.0.0.1:{detached.admin_port}/healthz"
        admin = httpx.get(admin_url, timeout=10, trust_env=False)
        assert admin.status_code == 200
        record = read_record(detached.run_dir)
        assert record is not None and (record.pid, record.state) == (pid, "serving")
        processes = detached.remember(pid)
        assert len(processes) >= 8  # supervisor, 2 routers, 2 detokenizers, engine, 2 workers

        again = detached.up()
        assert again.returncode == 1
        assert f"a stack is already running from run dir {detached.run_dir}" in again.stderr
        assert f"supervisor pid {pid}" in again.stderr
        other_dir = Path(tempfile.mkdtemp(prefix="sb-dt2-", dir="/tmp"))
        try:
            elsewhere = detached.up(run_dir=other_dir)
            assert elsewhere.returncode == 1
            assert f"port {detached.port}: already in use" in elsewhere.stderr
            assert not lock_held(other_dir) and socket_files(other_dir) == []
        finally:
            shutil.rmtree(other_dir, ignore_errors=True)
        assert generate(url, timeout=30).status_code == 200  # the first stack is untouched

        logs = detached.switchboard("logs", "--run-dir", str(detached.run_dir), "--lines", "5")
        assert logs.returncode == 0, logs.stderr
        assert len(logs.stdout.splitlines()) == 5
        logged = (detached.run_dir / LOG_FILE).read_text()
        assert "switchboard: serving" in logged
        # The generated token is on the starter's stdout only: the log outlives the stack.
        token = re.search(r"#token=([0-9a-f]{64});", started.stdout)
        assert token is not None, started.stdout
        assert token.group(1) not in logged and "(token generated, not logged)" in logged
        self._follow_stops_on_sigterm(detached)

        stopped = detached.switchboard("down", "--run-dir", str(detached.run_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped the stack of run dir {detached.run_dir} (supervisor pid {pid})" in (
            stopped.stdout
        )
        wait_until(lambda: all(gone(process) for process in processes), 30.0, "every process gone")
        assert detached.group_members(pid) == []
        assert socket_files(detached.run_dir) == []
        assert not lock_held(detached.run_dir)
        assert token.group(1) not in (detached.run_dir / LOG_FILE).read_text()

        none = detached.switchboard("down", "--run-dir", str(detached.run_dir))
        assert none.returncode == 1
        assert f"no stack is running from run dir {detached.run_dir}" in none.stderr

    @staticmethod
    def _follow_stops_on_sigterm(detached: Detached) -> None:
        """``logs --follow`` prints the tail, keeps running, and ends cleanly on SIGTERM."""
        follower = subprocess.Popen(
            [sys.executable, "-m", "switchboard.cli", "logs", "-f", "-n", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env={**detached.env, "SWITCHBOARD_RUN_DIR": str(detached.run_dir)},
        )
        try:
            assert follower.stdout is not None
            assert follower.stdout.readline()  # the one tail line: it runs and follows
            assert follower.poll() is None
            follower.send_signal(signal.SIGTERM)
            _, err = follower.communicate(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate(timeout=30)
        assert follower.returncode == 0, err
        assert b"Traceback" not in err

    def test_logs_piped_to_head_is_quiet(self, detached: Detached) -> None:
        """``logs | head -c 10`` over a log bigger than a pipe holds: exit 0, no
        BrokenPipeError traceback; a run dir without a log is exit 1, named."""
        missing = detached.switchboard("logs", "--run-dir", str(detached.run_dir))
        assert missing.returncode == 1
        assert f"no log in run dir {detached.run_dir}" in missing.stderr
        line = b"2026-01-05 10:00:01,102 INFO switchboard.supervisor[4200]: filler\n"
        (detached.run_dir / LOG_FILE).write_bytes(line * 40_000)  # ~2.6 MB
        piped = subprocess.run(
            f"{sys.executable} -m switchboard.cli logs --run-dir {detached.run_dir} "
            "-n 100000 | head -c 10; echo; echo status ${PIPESTATUS[0]}",
            shell=True,
            executable="/bin/bash",
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=detached.env,
            timeout=COMMAND_S,
            check=False,
        )
        assert piped.stdout == "2026-01-05\nstatus 0\n", piped.stdout
        assert piped.stderr == ""

    def test_failing_engine_is_named(self, detached: Detached) -> None:
        """An engine command that exits (/bin/false) makes up --detach exit 1 naming the
        engine, with nothing left running and no socket file."""
        failed = detached.up("--engine", "command", "--engine-command", "/bin/false")
        assert failed.returncode == 1, failed.stdout
        assert failed.stdout == ""
        first = failed.stderr.splitlines()[0]
        assert first.startswith("switchboard up: the stack is not serving: its supervisor")
        assert "startup failed: engine (pid " in first and "exited during startup" in first
        assert "command: /bin/false" in first
        assert "the last lines of its log" in failed.stderr
        assert not lock_held(detached.run_dir)
        assert read_record(detached.run_dir) is None
        assert socket_files(detached.run_dir) == []
