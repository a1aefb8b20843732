"""``switchboard up`` as the supervisor tests drive it: :class:`Supervisor` runs one and
watches what it started, :class:`Stacks` starts a test's supervisors on free loopback
ports and checks at the end that none left a process or a socket file, and
:func:`refuse` runs one that must refuse its settings.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import psutil

from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, child_env, socket_files, wait_until

__all__ = [
    "SERVING",
    "STARTUP_S",
    "Stacks",
    "Supervisor",
    "generate",
    "gone",
    "refuse",
    "stack_env",
    "up_argv",
]

SERVING = re.compile(r"^switchboard: serving (http://\S+) .*; run dir (\S+); Ctrl-C to stop$")
#: The stack starts seven or so Python processes on a noisy 2-core machine.
STARTUP_S = 60.0


def stack_env(cache_dir: Path) -> dict[str, str]:
    """The test environment without SWITCHBOARD_* settings, and a shared tokenizer cache."""
    env = {
        name: value
        for name, value in child_env().items()
        if not name.startswith("SWITCHBOARD_") or name == "SWITCHBOARD_NO_FASTPATH"
    }
    env["SWITCHBOARD_CACHE_DIR"] = str(cache_dir)
    return env


def up_argv(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "switchboard.cli", "up", *arguments]


def gone(process: psutil.Process) -> bool:
    """Exited (a zombie waiting for a reaper counts: it runs nothing and holds no socket)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Supervisor:
    """One ``switchboard up`` process, its stdout and stderr files, and what it started."""

    def __init__(self, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.stdout_path = log_dir / "up.stdout"
        self.stderr_path = log_dir / "up.stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
            )
        self.seen: dict[int, psutil.Process] = {}
        self.url = ""
        self.run_dir = Path()

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def assert_running(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise AssertionError(f"switchboard up exited {code}:\n{self.stderr()[-4000:]}")

    def wait_serving(self) -> None:
        """Wait for the serving line; remember the URL and run dir it names."""

        def serving() -> re.Match[str] | None:
            self.assert_running()
            return SERVING.match(self.stdout().strip())

        match = wait_until(serving, STARTUP_S, "the serving line")
        self.url, self.run_dir = match.group(1), Path(match.group(2))
        self.children()

    def children(self) -> list[psutil.Process]:
        """The supervisor's live descendants (remembered, so teardown can check them)."""
        found = psutil.Process(self.popen.pid).children(recursive=True)
        self.seen.update({child.pid: child for child in found})
        return found

    def children_in(self, role: str) -> list[psutil.Process]:
        """The running children whose command line is ``switchboard.cli <role> ...``."""
        found = []
        for process in self.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if process.cmdline()[2:4] == ["switchboard.cli", role] and not gone(process):
                    found.append(process)
        return found

    def terminate(self, timeout: float = 60.0) -> int:
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)

    def shutdown(self) -> list[str]:
        """Stop the supervisor if it runs; kill and report any process it left behind."""
        problems = []
        if self.popen.poll() is None:
            try:
                self.terminate()
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
                problems.append("switchboard up ignored SIGTERM for 60 s")
        leftover = [process for process in self.seen.values() if not gone(process)]
        for process in leftover:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        if leftover:
            problems.append(f"processes left running: {leftover}")
        return problems


class Stacks:
    """Starts supervisors for one test, each on free ports, all stopped and checked at the end."""

    def __init__(self, cache_dir: Path, log_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.log_dir = log_dir
        #: A run directory short enough for ipc paths, for stacks given ``--run-dir``.
        self.run_dir = Path(tempfile.mkdtemp(prefix="sb-up-", dir="/tmp"))
        self.started: list[Supervisor] = []

    def start(self, *arguments: str) -> Supervisor:
        """Start ``switchboard up`` with ``arguments`` and wait until it serves."""
        port, admin_port = free_port(), free_port()
        argv = up_argv("--port", str(port), "--admin-port", str(admin_port), *arguments)
        log_dir = self.log_dir / f"stack-{len(self.started)}"
        log_dir.mkdir()
        supervisor = Supervisor(argv, stack_env(self.cache_dir), log_dir)
        self.started.append(supervisor)
        supervisor.wait_serving()
        return supervisor

    def close(self) -> list[str]:
        """Stop every supervisor, then check the run directory; what went wrong."""
        problems = [problem for supervisor in self.started for problem in supervisor.shutdown()]
        if self.run_dir.exists():
            leftover = socket_files(self.run_dir)
            if leftover:
                problems.append(f"socket files left in the run dir: {leftover}")
            shutil.rmtree(self.run_dir, ignore_errors=True)
        return problems


def generate(url: str, *, timeout: float) -> httpx.Response:
    """A short non-streaming ``POST /generate``."""
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 4}}
    return httpx.post(f"{url}/generate", json=body, timeout=timeout)


def refuse(cache_dir: Path, *arguments: str, env: dict[str, str] | None = None) -> str:
    """Run ``switchboard up`` expecting a refusal; return its single stderr line."""
    result = subprocess.run(
        up_argv(*arguments),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**stack_env(cache_dir), **(env or {})},
        timeout=60,
        check=False,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("switchboard up: "), result.stderr
    assert result.stdout == ""
    return lines[0]
