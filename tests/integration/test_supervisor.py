"""``switchboard up``: refusals, readiness, restarts, dying with the supervisor, drain and stop.

Every stack here is a real supervisor with real children on free loopback ports; each
test owns its supervisor and checks at teardown that no process it started is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.harness import REPO_ROOT, child_env, socket_files, wait_until

pytestmark = pytest.mark.integration

SERVING = re.compile(r"^switchboard: serving (http://\S+) .*; run dir (\S+); Ctrl-C to stop$")
#: The stack starts seven or so Python processes on a noisy 2-core machine.
STARTUP_S = 60.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tokenizer cache for every stack in the session (trained by the first)."""
    return tmp_path_factory.mktemp("switchboard-cache")


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


@pytest.fixture
def stacks(cache_dir: Path, tmp_path: Path) -> Iterator[Stacks]:
    """This test's supervisors; teardown fails on a leftover process or socket file."""
    owner = Stacks(cache_dir, tmp_path)
    yield owner
    problems = owner.close()
    if problems:
        for supervisor in owner.started:
            print(supervisor.stderr()[-6000:])
    assert not problems, "\n".join(problems)


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


class TestRefusals:
    """Bad settings fail at once: exit 2, one line on stderr, nothing started."""

    def test_port_in_use(self, cache_dir: Path) -> None:
        """A port another process listens on is refused before anything starts."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            assert "already in use" in refuse(cache_dir, "--port", str(port))

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            (("--tokenizer", "/nonexistent/tokenizer.json"), "tokenizer file not found"),
            (("--workers", "0"), "--workers 0"),
        ],
    )
    def test_bad_flag(self, cache_dir: Path, arguments: tuple[str, ...], expected: str) -> None:
        """A missing tokenizer file or zero workers is refused."""
        assert expected in refuse(cache_dir, "--port", str(free_port()), *arguments)

    def test_bad_config_file(self, cache_dir: Path, tmp_path: Path) -> None:
        """A config file that is not TOML is refused, naming the file."""
        config = tmp_path / "stack.toml"
        config.write_text("workers = = 2\n")
        assert f"config file {config}: not valid TOML" in refuse(cache_dir, "--config", str(config))

    def test_flag_beats_env_beats_file(self, cache_dir: Path, tmp_path: Path) -> None:
        """The refusal names the layer whose value won: flag, then variable, then file."""
        config = tmp_path / "stack.toml"
        config.write_text("detokenizers = 0\n")
        env = {"SWITCHBOARD_DETOKENIZERS": "-1"}
        given = ("--config", str(config), "--port", str(free_port()))
        assert "--detokenizers -2" in refuse(cache_dir, *given, "--detokenizers", "-2", env=env)
        assert "SWITCHBOARD_DETOKENIZERS=-1" in refuse(cache_dir, *given, env=env)
        assert f"{config}: detokenizers = 0" in refuse(cache_dir, *given)


class TestLifecycle:
    """Serving, restarts, dying with the supervisor and stopping."""

    def test_serves_then_stops_cleanly_on_sigterm(self, stacks: Stacks) -> None:
        """It prints one serving line and serves; SIGTERM exits 0 leaving no process or file."""
        supervisor = stacks.start()
        assert supervisor.stdout().count("\n") == 1
        assert "(2 workers, 2 detokenizers, built-in engine)" in supervisor.stdout()
        assert supervisor.run_dir.is_dir() and socket_files(supervisor.run_dir)
        children = supervisor.children()
        # router, detok-router, 2 detokenizers, engine, 2 workers, admin app
        assert len(children) == 1 + 1 + 2 + 1 + 2 + 1
        reply = generate(supervisor.url, timeout=30)
        assert reply.status_code == 200, reply.text
        assert supervisor.terminate() == 0
        assert all(gone(child) for child in children)
        assert not supervisor.run_dir.exists()

    def test_supervisor_killed_takes_children_down(self, stacks: Stacks) -> None:
        """After kill -9 of the supervisor, every child it started exits within 5 s."""
        supervisor = stacks.start("--run-dir", str(stacks.run_dir), "--workers", "1")
        children = supervisor.children()
        assert len(children) == 1 + 1 + 2 + 1 + 1 + 1
        supervisor.popen.kill()
        supervisor.popen.wait(timeout=10)
        wait_until(
            lambda: all(gone(child) for child in children),
            5.0,
            lambda: f"children still running: {[c for c in children if not gone(c)]}",
        )

    def test_killed_children_are_restarted(self, stacks: Stacks) -> None:
        """SIGKILLed engine and detokenizer are logged, restarted with new pids, and serve."""
        supervisor = stacks.start("--run-dir", str(stacks.run_dir), "--workers", "1")
        counts = {role: len(supervisor.children_in(role)) for role in ("engine", "detokenizer")}
        victims = {role: supervisor.children_in(role)[0] for role in counts}
        for victim in victims.values():
            victim.kill()
        for role, victim in victims.items():

            def replaced(role: str = role, victim: psutil.Process = victim) -> bool:
                supervisor.assert_running()
                pids = {child.pid for child in supervisor.children_in(role)}
                return victim.pid not in pids and len(pids) == counts[role]

            wait_until(replaced, 15.0, f"a new {role}")
            # The new child can show up a moment before the supervisor logs its restart.
            restarted = rf"restarted {role}\S*: pid \d+ \(was {victim.pid}; restart 1\)"

            def logged(pattern: str = restarted) -> bool:
                return re.search(pattern, supervisor.stderr()) is not None

            wait_until(logged, 5.0, f"the restart of {role} logged")
            log = supervisor.stderr()
            assert re.search(rf"pid {victim.pid}\) exited unexpectedly \(killed by SIGKILL\)", log)

        def generates() -> bool:
            try:
                return generate(supervisor.url, timeout=3).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(generates, 20.0, "a request served after the restarts", interval=0.2)

    def test_sigterm_drains_streams_and_refuses_new(self, stacks: Stacks) -> None:
        """On SIGTERM a streaming request runs to [DONE] while new requests get 503."""
        supervisor = stacks.start("--run-dir", str(stacks.run_dir), "--step-time", "0.05")
        first_chunk = threading.Event()
        chunks: list[str] = []
        failure: list[BaseException] = []

        def stream() -> None:
            body = {"text": "hi", "sampling_params": {"max_new_tokens": 40}, "stream": True}
            try:
                with httpx.stream(
                    "POST", f"{supervisor.url}/generate", json=body, timeout=30
                ) as reply:
                    assert reply.status_code == 200, reply.read()
                    for line in reply.iter_lines():
                        if line:
                            chunks.append(line)
                            first_chunk.set()
            except BaseException as exc:
                failure.append(exc)
                first_chunk.set()

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        assert first_chunk.wait(30), "no first chunk"
        supervisor.popen.send_signal(signal.SIGTERM)

        def refused() -> bool:
            reply = generate(supervisor.url, timeout=5)
            return reply.status_code == 503 and "retry-after" in reply.headers

        wait_until(refused, 10.0, "a new request refused with 503", interval=0.05)
        assert reader.is_alive(), "the stream ended before the drain refused new requests"
        reader.join(timeout=30)
        assert not failure, failure
        assert chunks[-1] == "data: [DONE]"
        assert len(chunks) > 2
        assert supervisor.popen.wait(timeout=60) == 0
        assert os.listdir(stacks.run_dir) == []

    def test_engine_restart_ends_its_lost_streams_with_abort(self, stacks: Stacks) -> None:
        """A stream whose request died with the engine ends with an abort finish reason
        (not a hang) once the restarted engine's first load snapshot arrives."""
        supervisor = stacks.start(
            "--run-dir", str(stacks.run_dir), "--workers", "1", "--step-time", "0.05"
        )
        events: list[str] = []
        started = threading.Event()

        def stream() -> None:
            body = {"text": "hi", "sampling_params": {"max_new_tokens": 400}, "stream": True}
            with httpx.stream("POST", f"{supervisor.url}/generate", json=body, timeout=60) as reply:
                for line in reply.iter_lines():
                    if line:
                        events.append(line)
                        started.set()

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        assert started.wait(30), "no first event"
        (engine,) = supervisor.children_in("engine")
        engine.kill()
        reader.join(timeout=45)
        assert not reader.is_alive(), "the stream hung after the engine died"
        assert events[-1] == "data: [DONE]"
        last = json.loads(events[-2].removeprefix("data: "))
        reason = last["meta_info"]["finish_reason"]
        assert reason["type"] == "abort" and "restarted" in reason["message"], reason
        assert generate(supervisor.url, timeout=10).status_code == 200
