"""Starting and stopping the routers: clean SIGTERM, dying with the parent, bad settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import zmq

from router_core.control import ControlClient, ControlTimeout
from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints
from tests.integration.harness import (
    ManagedProcess,
    SocketFactory,
    Stack,
    child_env,
    ipc_path,
    router_socket_files,
    socket_files,
    wait_until,
)
from tests.integration.harness.control import ask

pytestmark = pytest.mark.integration


def stop_within(process: ManagedProcess, seconds: float) -> float:
    """SIGTERM a managed process, assert exit 0 within ``seconds``; return the time taken."""
    started = time.monotonic()
    code = process.terminate(timeout=seconds + 2.0)
    took = time.monotonic() - started
    assert code == 0, f"exit status {code}"
    assert took < seconds, f"took {took:.2f}s to stop"
    return took


def run_cli(argv: list[str], timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        stdin=subprocess.DEVNULL,
    )


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Non-zero exit, no traceback, exactly one line on stderr naming the problem."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n{result.stderr}"
    for needle in needles:
        assert needle in lines[0], lines[0]


class TestCleanStop:
    def test_sigterm_stops_both_routers_promptly_and_removes_their_sockets(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """With a worker registered and the engine streaming outputs through the
        detokenizer router to two detokenizers, SIGTERM stops the router and the
        detokenizer router with exit 0 in under 3 s, each removing every socket file it
        bound."""
        detok_endpoints = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 2)
        detokenizers = [sockets.bound(zmq.PULL, e) for e in detok_endpoints.detokenizers]
        router = stack.start_router()
        detok = stack.start_detok_router(2)
        worker = stack.start_worker("w0")
        stack.start_engine(
            "--outputs-endpoint",
            detok_endpoints.inbound,
            "--emit-to",
            worker.address,
            "--emit-to",
            f"ipc://{stack.run_dir}/worker-w1",
            "--emit-rate",
            "200",
            wait_live=router,
        )
        seen = [0, 0]

        def detokenizers_busy() -> bool:
            for index, sock in enumerate(detokenizers):
                while sock.poll(0):
                    seen[index] += len(sock.recv_multipart()) - 1
            return sum(seen) > 40

        wait_until(detokenizers_busy, 10.0, lambda: f"rows at the detokenizers: {seen}")
        stop_within(router.process, 3.0)
        assert not [p for p in router.process.binds if p.exists()]
        stop_within(detok.process, 3.0)
        assert not [p for p in detok.process.binds if p.exists()]

    def test_sigterm_with_an_undeliverable_backlog_still_stops_in_time(self, stack: Stack) -> None:
        """A router holding requests for an engine that never came stops on SIGTERM
        within 3 s (its drain deadline is 2 s), exit 0, socket files removed."""
        router = stack.start_router()
        stack.start_worker("w0", "--requests", "5")
        wait_until(lambda: router.ctl("status")["backlogs"]["engine"] >= 1, 5.0, "a request queued")
        stop_within(router.process, 3.0)
        assert not [p for p in router.process.binds if p.exists()]


PARENT_SCRIPT = """
import os, signal, subprocess, sys
switchboard, run_dir, pid_file = sys.argv[1:4]
child = subprocess.Popen(
    [switchboard, "router", "--run-dir", run_dir, "--parent-pid", str(os.getpid())],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
with open(pid_file + ".tmp", "w") as f:
    f.write(str(child.pid))
os.rename(pid_file + ".tmp", pid_file)
signal.pause()
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class TestParentDeath:
    def test_router_exits_when_its_parent_is_killed(
        self, stack: Stack, switchboard_bin: str, tmp_path: Path
    ) -> None:
        """A router started with --parent-pid exits (cleanly, removing its sockets)
        within 5 s of its parent being SIGKILLed."""
        pid_file = tmp_path / "router.pid"
        parent = stack.processes.spawn(
            "parent",
            [
                sys.executable,
                "-c",
                PARENT_SCRIPT,
                switchboard_bin,
                str(stack.run_dir),
                str(pid_file),
            ],
        )

        def written_pid() -> str | None:
            return pid_file.read_text() if pid_file.exists() else None

        router_pid = int(wait_until(written_pid, 10.0, "the router's pid"))
        endpoints = RouterEndpoints.in_run_dir(stack.run_dir)
        bound = router_socket_files(endpoints)
        try:
            client = ControlClient(endpoints.control, context=stack.context, key=stack.key)
            try:

                def answers() -> bool:
                    try:
                        return bool(ask(client, "status", reply_timeout_s=0.25))
                    except ControlTimeout:
                        return False

                wait_until(answers, 15.0, "the orphan-to-be router to answer")
            finally:
                client.close()
            parent.kill()
            killed_at = time.monotonic()
            wait_until(lambda: gone(router_pid), 5.0, "the router to exit after its parent")
            took = time.monotonic() - killed_at
            assert took < 5.0
            leftover = [p for p in bound if p.exists()]
            assert not leftover, f"the router left {leftover}"
        finally:
            if not gone(router_pid):
                os.kill(router_pid, signal.SIGKILL)

    def test_router_refuses_to_start_when_its_parent_is_already_gone(
        self, switchboard_bin: str, run_dir: Path
    ) -> None:
        """--parent-pid naming a process that is not (or no longer) the parent makes the
        router exit at once, non-zero, with one line and nothing bound."""
        finished = subprocess.Popen(["true"])
        finished.wait()
        result = run_cli(
            [
                switchboard_bin,
                "router",
                "--run-dir",
                str(run_dir),
                "--parent-pid",
                str(finished.pid),
            ]
        )
        assert_one_clear_line(result, str(finished.pid))
        assert socket_files(run_dir) == []


class TestBadSettings:
    @pytest.mark.parametrize(
        ("argv", "needles"),
        [
            pytest.param(
                ["router", "--heartbeat-timeout", "0"],
                ["--heartbeat-timeout"],
                id="heartbeat-timeout-0",
            ),
            pytest.param(
                ["detok-router", "--detokenizers", "0"],
                ["--detokenizers"],
                id="detokenizers-0",
            ),
            pytest.param(
                ["router", "--heartbeat-timeout", "0.5"],
                ["heartbeat_timeout"],
                id="timeout-below-interval",
            ),
            pytest.param(
                ["router", "--workers-endpoint", "tcp://0.0.0.0:5555"],
                ["0.0.0.0", "loopback"],
                id="tcp-any-address",
            ),
            pytest.param(
                ["detok-router", "--detokenizer-endpoint", "tcp://10.1.2.3:7000"],
                ["10.1.2.3"],
                id="detok-remote-endpoint",
            ),
            pytest.param(
                ["router", "--engine-endpoint", "http://localhost:1"],
                ["http://"],
                id="unknown-scheme",
            ),
        ],
    )
    def test_bad_setting_exits_with_one_clear_line(
        self, switchboard_bin: str, run_dir: Path, argv: list[str], needles: list[str]
    ) -> None:
        """A bad setting makes the command exit non-zero at once with exactly one line on
        stderr naming it, no traceback, and no socket bound."""
        command, *rest = argv
        result = run_cli([switchboard_bin, command, "--run-dir", str(run_dir), *rest])
        assert_one_clear_line(result, f"switchboard {command}", *needles)
        assert socket_files(run_dir) == []

    @pytest.mark.parametrize("command", ["router", "detok-router"])
    def test_missing_run_dir_exits_with_one_clear_line(
        self, switchboard_bin: str, command: str, tmp_path: Path
    ) -> None:
        """A --run-dir that does not exist, or none at all, is one clear line, exit 2."""
        missing_dir = tmp_path / "nope"
        result = run_cli([switchboard_bin, command, "--run-dir", str(missing_dir)])
        assert_one_clear_line(result, str(missing_dir), "not a directory")
        assert result.returncode == 2
        result = run_cli([switchboard_bin, command])
        assert_one_clear_line(result, "required without --run-dir")
        assert result.returncode == 2


class TestEndpointInUse:
    def test_tcp_endpoint_in_use_fails_with_one_line_and_cleans_up(
        self, switchboard_bin: str, run_dir: Path, sockets: SocketFactory
    ) -> None:
        """Binding a tcp endpoint someone else holds fails at once: exit 1, one line naming
        the address, and the sockets already bound are closed and their files removed."""
        holder = sockets.context.socket(zmq.PULL)
        try:
            port = holder.bind_to_random_port("tcp://127.0.0.1")
            result = run_cli(
                [
                    switchboard_bin,
                    "router",
                    "--run-dir",
                    str(run_dir),
                    "--log-level",
                    "WARNING",
                    "--outputs-endpoint",
                    f"tcp://127.0.0.1:{port}",
                ]
            )
        finally:
            holder.close(linger=0)
        assert_one_clear_line(result, "Address already in use", str(port))
        assert result.returncode == 1
        assert socket_files(run_dir) == []

    def test_tcp_endpoint_in_use_is_one_line_at_the_default_log_level(
        self, switchboard_bin: str, run_dir: Path, sockets: SocketFactory
    ) -> None:
        """At the default log level too, a bind failure is exactly one line on stderr."""
        holder = sockets.context.socket(zmq.PULL)
        try:
            port = holder.bind_to_random_port("tcp://127.0.0.1")
            result = run_cli(
                [
                    switchboard_bin,
                    "router",
                    "--run-dir",
                    str(run_dir),
                    "--outputs-endpoint",
                    f"tcp://127.0.0.1:{port}",
                ]
            )
        finally:
            holder.close(linger=0)
        assert_one_clear_line(result, "Address already in use")

    def test_second_router_on_the_same_run_dir_fails_and_the_first_keeps_serving(
        self, stack: Stack
    ) -> None:
        """A second router on a run dir whose router is running exits non-zero with one
        line, and the first keeps answering on its control socket."""
        first = stack.start_router()
        pid = first.ctl("status")["pid"]
        second = stack.start_router("--log-level", "WARNING", name="second-router", ready=False)
        second.process.expect_clean_exit = False
        wait_until(lambda: not second.process.alive(), 3.0, "the second router to give up")
        assert second.process.popen.returncode != 0
        assert len(second.process.log_tail().splitlines()) == 1
        assert first.ctl("status")["pid"] == pid
        assert ipc_path(first.endpoints.control).exists()
