"""The operator commands against a real stack: ``python -m switchboard.cli <command>``.

One ``switchboard up`` (two workers and the admin app, from
:func:`~tests.integration.harness.admin_stack.admin_stack`) serves the whole module; every
test runs the CLI as a subprocess, exactly as an operator would, and checks its output,
its one stderr line and its exit status. Each test leaves the stack serving: continued,
and every worker undrained.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, child_env, wait_until

pytestmark = pytest.mark.integration

#: A CLI process: interpreter start, parse, one request (a barrier waits longer).
CLI_TIMEOUT_S = 60.0
EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE = 0, 1, 3


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """Two workers and the admin app, shared by every test here."""
    with admin_stack(tmp_path_factory, workers=2) as running:
        yield running


@pytest.fixture(autouse=True)
def healthy(stack: AdminStack) -> Iterator[None]:
    """Every test starts and ends with the stack continued and no worker drained."""
    restore(stack)
    yield
    restore(stack)


def restore(stack: AdminStack) -> None:
    """Continue, undrain whoever is draining, and wait until every worker serves."""
    with stack.client() as client:
        if client.get("/api/status").json()["paused"]:
            assert client.post("/api/continue", json={"timeout_s": 10}).status_code == 200
        for worker in client.get("/api/workers").json()["workers"]:
            if worker["state"] in ("draining", "drained"):
                client.post(f"/api/workers/{worker['id']}/undrain")

        def serving() -> bool:
            stack.assert_running()
            states = [w["state"] for w in client.get("/api/workers").json()["workers"]]
            return states.count("serving") == 2 and set(states) <= {"serving", "dead"}

        wait_until(serving, 30.0, lambda: f"workers serving: {client.get('/api/workers').text}")


def cli_env(**extra: str) -> dict[str, str]:
    """The test run's environment without the operator's own SWITCHBOARD_ADMIN_*."""
    env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_ADMIN_")}
    return {**env, **extra}


def cli(
    stack: AdminStack | None,
    *words: str,
    token: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m switchboard.cli WORDS --url ADMIN --token TOKEN`` (operator's by default);
    ``stack=None`` passes neither flag."""
    connection: list[str] = []
    if stack is not None:
        # --token=VALUE: a token may start with "-" (any url-safe one can), which argparse
        # would otherwise take for an option.
        connection = ["--url", stack.admin_url, f"--token={token or stack.operator_token}"]
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli", *words, *connection],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env if env is not None else cli_env(),
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def succeeded(done: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must exit 0 quietly."""
    assert done.returncode == EXIT_OK, f"exit {done.returncode}: {done.stderr}"
    assert done.stderr == ""
    return done.stdout


def one_line(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The single stderr line of a failed command, checked to be a line and no traceback."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"switchboard {command}: ")
    return lines[0]


def worker_ids(stack: AdminStack) -> list[str]:
    with stack.client() as client:
        return sorted(w["id"] for w in client.get("/api/workers").json()["workers"])


def table_ids(stack: AdminStack) -> list[str]:
    """The ID column of ``switchboard workers``, top to bottom."""
    return [line.split()[0] for line in succeeded(cli(stack, "workers")).splitlines()[1:]]


def router_order(stack: AdminStack) -> list[str]:
    """The registered workers in the order the router holds them (``ctl list_workers``)."""
    done = cli(None, "ctl", "--run-dir", str(stack.run_dir), "list_workers")
    return [worker["id"] for worker in json.loads(succeeded(done))]


def api(stack: AdminStack, method: str, path: str, **kwargs: Any) -> Any:
    with stack.client() as client:
        return client.request(method, path, **kwargs).json()


class TestReads:
    """status, workers and load: readable tables, and the API's JSON with --json."""

    def test_status_table(self, stack: AdminStack) -> None:
        """status shows not paused, a live engine, two serving workers, both versions."""
        lines = succeeded(cli(stack, "status")).splitlines()
        assert lines[0].startswith("paused    no, since ")
        assert lines[2].startswith("engine    live; running ")
        assert "workers   2 serving" in lines
        assert any(line.startswith("versions  admin ") for line in lines)

    def test_status_json(self, stack: AdminStack) -> None:
        """--json prints the API's status document."""
        status = json.loads(succeeded(cli(stack, "status", "--json")))
        assert status["paused"] is False
        assert status["workers"] == {"serving": 2}
        assert status["engine"]["live"] is True

    def test_workers_table(self, stack: AdminStack) -> None:
        """One row per worker: id, serving, in-flight, heartbeat age, requests, safe to delete."""
        lines = succeeded(cli(stack, "workers")).splitlines()
        assert lines[0].split()[:3] == ["ID", "STATE", "INFLIGHT"]
        rows = [line.split() for line in lines[1:]]
        assert sorted(row[0] for row in rows) == worker_ids(stack)
        assert all(row[1] == "serving" and row[-1] == "no" for row in rows)
        assert all(row[4] == "ago" for row in rows)

    def test_workers_in_id_order_after_a_restart(self, stack: AdminStack) -> None:
        """w0 dies (the router removes it first) and comes back registering after w1: the
        router now holds w1 first, and ``workers`` (table and JSON) still lists w0 first."""
        assert table_ids(stack) == ["w0", "w1"]
        victim = next(w for w in api(stack, "GET", "/api/workers")["workers"] if w["id"] == "w0")
        # Stopped until the router has given up on it, so its successor is a new entry.
        os.kill(victim["pid"], signal.SIGSTOP)
        try:

            def removed() -> bool:
                return "w0" not in router_order(stack)

            wait_until(removed, 30.0, lambda: f"the router still holds w0: {router_order(stack)}")
        finally:
            os.kill(victim["pid"], signal.SIGKILL)

        def back() -> bool:
            stack.assert_running()
            return router_order(stack) == ["w1", "w0"]

        wait_until(back, 60.0, lambda: f"the router holds {router_order(stack)}")
        listed = json.loads(succeeded(cli(stack, "workers", "--json")))["workers"]
        assert [w["id"] for w in listed if w["state"] == "serving"] == ["w0", "w1"]
        assert [w["id"] for w in listed] == sorted(w["id"] for w in listed)
        rows = succeeded(cli(stack, "workers")).splitlines()[1:]
        assert [row.split()[0] for row in rows] == [w["id"] for w in listed]

    def test_workers_json(self, stack: AdminStack) -> None:
        """--json prints the workers document, every field the API gives."""
        workers = json.loads(succeeded(cli(stack, "workers", "--json")))["workers"]
        assert sorted(w["id"] for w in workers) == worker_ids(stack)
        assert all(w["state"] == "serving" and w["pid"] > 0 for w in workers)

    def test_load(self, stack: AdminStack) -> None:
        """load shows the engine's report, and its JSON has every load field."""
        assert succeeded(cli(stack, "load")).startswith("running ")
        load = json.loads(succeeded(cli(stack, "load", "--json")))["load"]
        assert set(load) >= {"running", "waiting", "max_running", "token_usage", "step"}

    def test_viewer_reads(self, stack: AdminStack) -> None:
        """A viewer token is enough for status."""
        assert succeeded(cli(stack, "status", token=stack.viewer_token)).startswith("paused")

    def test_environment(self, stack: AdminStack) -> None:
        """SWITCHBOARD_ADMIN_URL and SWITCHBOARD_ADMIN_TOKEN replace --url and --token."""
        env = cli_env(
            SWITCHBOARD_ADMIN_URL=stack.admin_url, SWITCHBOARD_ADMIN_TOKEN=stack.viewer_token
        )
        assert succeeded(cli(None, "workers", env=env)).startswith("ID")


class TestPauseContinue:
    """pause and continue are barriers: exit 0 once every worker and the engine acked."""

    def test_pause_in_place_then_continue(self, stack: AdminStack) -> None:
        """pause --mode in_place acks from both workers and the engine; continue undoes it."""
        out = succeeded(cli(stack, "pause", "--mode", "in_place", "--timeout-s", "5"))
        assert out.splitlines()[0].startswith("pause (in_place): complete in ")
        assert "stragglers  -" in out.splitlines()
        status = api(stack, "GET", "/api/status")
        assert (status["paused"], status["pause_mode"]) == (True, "in_place")
        assert set(status["recent_operations"][-1]["acked"]) >= {"engine", *worker_ids(stack)}
        paused = succeeded(cli(stack, "status")).splitlines()
        assert paused[0].startswith("paused    YES, since ")
        assert paused[1] == "mode      in_place"

        out = succeeded(cli(stack, "continue", "--timeout", "5"))
        assert out.splitlines()[0].startswith("continue: complete in ")
        assert api(stack, "GET", "/api/status")["paused"] is False

    def test_pause_json(self, stack: AdminStack) -> None:
        """--json prints the operation: complete, acknowledged by every worker."""
        operation = json.loads(succeeded(cli(stack, "pause", "--json")))
        assert operation["action"] == "pause"
        assert operation["mode"] == "abort"
        assert operation["complete"] is True
        assert set(operation["acked"]) >= set(worker_ids(stack))

    def test_straggler_times_out(self, stack: AdminStack) -> None:
        """A stopped worker cannot acknowledge: pause answers 504, the CLI names it, exit 1."""
        workers = api(stack, "GET", "/api/workers")["workers"]
        frozen = workers[0]
        os.kill(frozen["pid"], signal.SIGSTOP)
        try:
            done = cli(stack, "pause", "--mode", "in_place", "--timeout", "0.5")
        finally:
            os.kill(frozen["pid"], signal.SIGCONT)
        assert done.returncode == EXIT_FAILED, done.stderr
        line = one_line(done, "pause")
        assert line.startswith("switchboard pause: timed out after ")
        assert line.endswith(f"stragglers: {frozen['id']}")
        assert f"stragglers  {frozen['id']}" in done.stdout.splitlines()
        assert "TIMED OUT after" in done.stdout


class TestDrain:
    """drain and undrain one worker; unknown workers and conflicts exit 1."""

    def test_drain_then_undrain(self, stack: AdminStack) -> None:
        """An idle worker drains to safe_to_delete; undrain puts it back to serving."""
        target = worker_ids(stack)[0]
        row = succeeded(cli(stack, "drain", target)).splitlines()[1].split()
        assert row[0] == target
        assert row[1] in ("draining", "drained")

        def drained() -> list[str] | None:
            out = succeeded(cli(stack, "workers"))
            rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
            return rows[target] if rows[target][1] == "drained" else None

        row = wait_until(drained, 30.0, f"{target} drained")
        assert row[-1] == "yes"  # safe to delete

        row = succeeded(cli(stack, "undrain", target)).splitlines()[1].split()
        assert row[:2] == [target, "serving"]

    def test_unknown_worker(self, stack: AdminStack) -> None:
        """drain of an unknown id exits 1 with the API's own message."""
        with stack.client() as client:
            expected = client.post("/api/workers/no-such-worker/drain").json()["error"]
        done = cli(stack, "drain", "no-such-worker")
        assert done.returncode == EXIT_FAILED
        assert done.stdout == ""
        assert one_line(done, "drain") == (
            f"switchboard drain: {expected['message']} (not_found, HTTP 404)"
        )

    def test_undrain_serving_conflicts(self, stack: AdminStack) -> None:
        """undrain of a serving worker is a conflict: exit 1 with the API's message."""
        done = cli(stack, "undrain", worker_ids(stack)[0])
        assert done.returncode == EXIT_FAILED
        assert one_line(done, "undrain").endswith("(conflict, HTTP 409)")


class TestFreezeGc:
    """freeze-gc: the router freezes its collector and asks the engine to."""

    def test_freeze_gc(self, stack: AdminStack) -> None:
        """Who froze and who was asked, as lines and as the API's JSON."""
        lines = succeeded(cli(stack, "freeze-gc")).splitlines()
        assert lines == ["frozen        tokenizer_router", "forwarded to  engine"]
        answer = json.loads(succeeded(cli(stack, "freeze-gc", "--json")))
        assert answer == {"frozen": ["tokenizer_router"], "forwarded_to": ["engine"]}

    def test_viewer_cannot_freeze(self, stack: AdminStack) -> None:
        """A viewer token is forbidden (403): exit 3."""
        done = cli(stack, "freeze-gc", token=stack.viewer_token)
        assert done.returncode == EXIT_UNAVAILABLE
        assert "HTTP 403" in one_line(done, "freeze-gc")


class TestRefusals:
    """Bad or missing tokens and an unreachable app exit 3, never echoing a token."""

    def test_bad_token(self, stack: AdminStack) -> None:
        """An unknown token is refused (401): exit 3, the token not printed."""
        bogus = "not-a-real-token-0123456789"
        done = cli(stack, "status", token=bogus)
        assert done.returncode == EXIT_UNAVAILABLE
        assert "HTTP 401" in one_line(done, "status")
        assert bogus not in done.stdout + done.stderr

    def test_viewer_cannot_pause(self, stack: AdminStack) -> None:
        """A viewer token on a mutation is forbidden (403): exit 3, nothing paused."""
        done = cli(stack, "pause", token=stack.viewer_token)
        assert done.returncode == EXIT_UNAVAILABLE
        assert "HTTP 403" in one_line(done, "pause")
        assert stack.viewer_token not in done.stdout + done.stderr
        assert api(stack, "GET", "/api/status")["paused"] is False

    def test_no_token(self, stack: AdminStack) -> None:
        """No token at all: 401, exit 3, and the line says how to give one."""
        env = cli_env(SWITCHBOARD_ADMIN_URL=stack.admin_url)
        done = cli(None, "workers", env=env)
        assert done.returncode == EXIT_UNAVAILABLE
        line = one_line(done, "workers")
        assert "give --token or set SWITCHBOARD_ADMIN_TOKEN" in line
        assert line.endswith("(unauthorized, HTTP 401)")

    def test_unreachable(self, stack: AdminStack) -> None:
        """Nothing listening at --url: exit 3 naming the URL."""
        url = f"http://127.0.0.1:{free_port()}"
        done = cli(None, "status", "--url", url, f"--token={stack.operator_token}")
        assert done.returncode == EXIT_UNAVAILABLE
        line = one_line(done, "status")
        assert line.startswith(f"switchboard status: cannot reach the admin app at {url}")
        assert stack.operator_token not in line
