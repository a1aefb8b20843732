"""``switchboard up``: refusals, readiness, restarts, dying with the supervisor, drain and stop.

Every stack here is a real supervisor with real children on free loopback ports; each
test owns its supervisor and checks at teardown that no process it started is left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.harness import socket_files, wait_until
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.supervisor import Stacks, generate, gone, refuse

pytestmark = pytest.mark.integration


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
            (
                ("--tokenizer", "/nonexistent/tokenizer.json"),
                "--tokenizer /nonexistent/tokenizer.json: not found (expected a tokenizer.json",
            ),
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
        """On SIGTERM a streaming request runs to [DONE] while new clients are refused at
        once: the port closes (the workers and the supervisor let go of its socket), so
        a new connection is refused rather than left waiting in its queue."""
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
            try:
                reply = generate(supervisor.url, timeout=5)
            except httpx.ConnectError:
                return True
            return reply.status_code == 503 and "retry-after" in reply.headers

        wait_until(refused, 10.0, "a new request refused", interval=0.05)
        assert reader.is_alive(), "the stream ended before the drain refused new requests"
        reader.join(timeout=30)
        assert not failure, failure
        assert chunks[-1] == "data: [DONE]"
        assert len(chunks) > 2
        assert supervisor.popen.wait(timeout=60) == 0
        assert os.listdir(stacks.run_dir) == []

    def test_engine_restart_ends_its_lost_streams_with_an_error(self, stacks: Stacks) -> None:
        """A stream whose request died with the engine ends with an error event naming the
        cause (not a hang, not a finish) once the restarted engine's first load snapshot
        arrives."""
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
        error = last["error"]
        assert (error["code"], error["cause"]) == (503, "engine_restarted"), error
        assert "restarted" in error["message"], error
        assert generate(supervisor.url, timeout=10).status_code == 200
