"""SIGTERM always ends within the stop's grace (``stop_grace_s``), under load, for every
way of running the stack: ``switchboard up``, ``make run``, and the two roles of a
multi-host stack (here both on loopback). Each stack serves streams far longer than the
grace when it is told to stop; it exits 0 inside ``stop_grace_s`` (plus the time a
process takes to be reaped), and every stream ends clearly: its exact text, or a prefix
of it with finish reason ``abort``, or an error event, never a cut or a wrong text.
(The container's stop is in ``test_container.py``.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from tests.integration.harness.curve_keys import gateway_keys
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.polling import REPO_ROOT, wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import StreamThread, unclear_ending
from tests.integration.harness.supervisor import SERVING, stack_env
from tests.integration.harness.up_stop import gone, live_descendants

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

GRACE_S = 8.0
#: Under stop_grace_s - 3: the drain gets 8 - 3 - 3 = 2 s, the workers 3 s more.
GRACEFUL_S = 3.0
#: What the kernel and a loaded machine add to the budget: reaping, the last log line.
SLACK_S = 2.0
#: Streams of 600 tokens at 20 ms a step: 12 s each, well past the grace.
TOKENS = 600
STREAMS = 12
BUDGET_FLAGS = (
    *("--stop-grace-s", str(GRACE_S), "--graceful-timeout-s", str(GRACEFUL_S)),
    *("--step-time-s", "0.02"),
)
SERVING_ROLE = re.compile(r"^switchboard: serving (http://\S+) ")
CONTROL_SERVING = re.compile(r"^switchboard: control host; workers join at (tcp://\S+) ")


class Started:
    """A ``switchboard up`` (or ``make run``) in a process group of its own, its output
    in a file, and every process it started remembered."""

    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
            )
        self.seen: dict[int, psutil.Process] = {}
        self.url = ""

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_serving(self, pattern: re.Pattern[str] = SERVING_ROLE) -> None:
        def serving() -> re.Match[str] | None:
            if self.popen.poll() is not None:
                raise AssertionError(f"exited {self.popen.returncode}:\n{self.text()[-4000:]}")
            return next(filter(None, map(pattern.match, self.text().splitlines())), None)

        self.url = wait_until(serving, 90.0, "the serving line").group(1)
        live_descendants(self.popen.pid, self.seen)

    def stop_in_budget(self, leader_codes: frozenset[int] = frozenset({0})) -> float:
        """SIGTERM the whole process group (as a terminal, systemd or a container runtime
        would); the seconds until every process of the stack was gone, checked to be in
        budget, the group leader to exit with one of ``leader_codes`` and the supervisor
        to have logged its clean end."""
        live_descendants(self.popen.pid, self.seen)
        started = time.monotonic()
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            code = self.popen.wait(GRACE_S + SLACK_S + 10)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
            raise AssertionError(f"running long after SIGTERM:\n{self.text()[-4000:]}") from None
        assert code in leader_codes, f"exit {code}:\n{self.text()[-4000:]}"
        wait_until(
            lambda: all(gone(p) for p in self.seen.values()),
            GRACE_S + SLACK_S + 10,
            "every process of the stack gone",
        )
        took = time.monotonic() - started
        assert took <= GRACE_S + SLACK_S, f"stopped in {took:.1f} s:\n{self.text()[-4000:]}"
        last = self.text().splitlines()[-1]
        assert "switchboard.supervisor" in last and "stopped; run dir" in last, last
        assert "SIGKILL" not in self.text(), self.text()[-4000:]
        return took

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        for process in self.seen.values():
            if not gone(process):
                process.kill()


def stop_under_load(
    started: Started,
    predictor: Predictor,
    stem: str,
    leader_codes: frozenset[int] = frozenset({0}),
) -> float:
    """Start long streams, stop ``started`` while they run; its stop time (checked) and
    every stream's ending (checked)."""
    prompts = [f"{stem} stop {i}" for i in range(STREAMS)]
    body = {"sampling_params": {"max_new_tokens": TOKENS}}
    threads = [
        StreamThread(started.url, {**body, "text": p}, timeout_s=60.0).start() for p in prompts
    ]
    wait_until(lambda: all(t.started() for t in threads), 30.0, "every stream under way")
    took = started.stop_in_budget(leader_codes)
    problems = [
        problem
        for thread, prompt in zip(threads, prompts, strict=True)
        if (problem := unclear_ending(thread.finish(30.0), prompt, predictor.text(prompt, TOKENS)))
    ]
    assert not problems, problems
    print(f"{stem}: stopped in {took:.2f} s with {STREAMS} streams of {TOKENS} tokens")
    return took


def up(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "switchboard.cli", "up", *arguments]


class TestStopWithinGrace:
    def test_switchboard_up(self, tmp_path: Path, cache_dir: Path, predictor: Predictor) -> None:
        argv = up("--port", str(free_port()), "--admin-port", str(free_port()), "--workers", "4")
        started = Started([*argv, *BUDGET_FLAGS], tmp_path / "up.log", stack_env(cache_dir))
        try:
            started.wait_serving(SERVING)
            stop_under_load(started, predictor, "up")
        finally:
            started.kill()

    def test_make_run(self, tmp_path: Path, cache_dir: Path, predictor: Predictor) -> None:
        """``make run`` as the README starts it, its arguments in RUN_ARGS."""
        ports = ("--port", str(free_port()), "--admin-port", str(free_port()))
        run_args = " ".join((*ports, "--workers", "4", *BUDGET_FLAGS))
        argv = ["make", "-s", "run", f"RUN_ARGS={run_args}"]
        started = Started(argv, tmp_path / "make.log", stack_env(cache_dir))
        try:
            started.wait_serving(SERVING)
            # make itself dies by the signal (as it does on Ctrl-C); the supervisor it
            # ran stops cleanly in budget, which is what the checks hold.
            stop_under_load(started, predictor, "make", frozenset({0, -signal.SIGTERM}))
        finally:
            started.kill()

    def test_control_and_worker_hosts(
        self, tmp_path: Path, cache_dir: Path, predictor: Predictor
    ) -> None:
        """A worker host stops under load within its grace, then the control host."""
        keys = gateway_keys(tmp_path / "keys")
        stack_key = tmp_path / "keys" / "stack.key"
        subprocess.run(
            [sys.executable, "-m", "switchboard.cli", "keys", "stack", str(stack_key)],
            check=True,
            capture_output=True,
            timeout=60,
        )
        gateway = f"tcp://127.0.0.1:{free_port()}"
        env = stack_env(cache_dir)
        control = Started(
            up(
                *("--role", "control", "--port", str(free_port())),
                *("--admin-port", str(free_port())),
                *keys.stack_args(gateway),
                *("--stack-key-file", str(stack_key)),
                *BUDGET_FLAGS,
            ),
            tmp_path / "control.log",
            env,
        )
        workers: Started | None = None
        try:
            control.wait_serving(CONTROL_SERVING)
            workers = Started(
                up(
                    *("--role", "workers", "--workers", "2", "--port", str(free_port())),
                    *("--control", gateway.removeprefix("tcp://")),
                    *("--curve-key-pair", str(keys.secret("host-a"))),
                    *("--gateway-public-key", str(keys.public("control"))),
                    *("--stack-key-file", str(stack_key)),
                    *BUDGET_FLAGS,
                ),
                tmp_path / "workers.log",
                env,
            )
            workers.wait_serving()
            stop_under_load(workers, predictor, "worker-host")
            assert control.popen.poll() is None
            took = control.stop_in_budget()
            print(f"control host: stopped in {took:.2f} s")
        finally:
            if workers is not None:
                workers.kill()
            control.kill()
