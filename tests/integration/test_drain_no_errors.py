"""A drain drops nothing: under streaming load from many clients, each request on a new
connection, an operator drains a worker of three (``switchboard drain ID --wait``) and
undrains it; drains one and restarts it; then restarts all three one at a time. Every
request of every scenario ends 200 with exactly the predicted text: a drained worker has
left the shared listening socket (its siblings take what is queued there), ends each
connection it holds after its response, and a restarted one takes its place on the same
socket.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.integration.harness.http_worker import predictor
from tests.integration.harness.polling import REPO_ROOT, wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.steady_load import LoadTally, SteadyLoad
from tests.integration.harness.supervisor import Stacks, Supervisor, stack_env

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

WORKERS = ("w0", "w1", "w2")
#: Concurrent clients, each always with one stream in flight.
CLIENTS = 12
TOKENS = 12
#: Streams finished exactly before and after each operation, so that the load really
#: spans it.
AROUND = 24
CONSOLE = re.compile(r"console (http://\S+)/#token=([0-9a-f]+)")


class Operator:
    """The stack's operator: the ``switchboard`` CLI and the admin API, with the token
    the serving line printed."""

    def __init__(self, supervisor: Supervisor, cache_dir: Path) -> None:
        match = CONSOLE.search(supervisor.stdout())
        assert match, supervisor.stdout()
        self.supervisor = supervisor
        self.admin_url, self.token = match.group(1), match.group(2)
        self.env = {
            **stack_env(cache_dir),
            "SWITCHBOARD_ADMIN_URL": self.admin_url,
            "SWITCHBOARD_ADMIN_TOKEN": self.token,
        }
        self.progress: list[str] = []

    def cli(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "switchboard.cli", *arguments]
        done = subprocess.run(
            command,
            check=False,
            env=self.env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (arguments, done.stdout, done.stderr)
        return done

    def drain(self, worker_id: str) -> None:
        """``switchboard drain ID --wait``: returns once the worker is safe to delete."""
        done = self.cli("drain", worker_id, "--wait", "30", "--json")
        assert json.loads(done.stdout)["safe_to_delete"] is True, done.stdout
        self.progress += done.stderr.splitlines()
        assert done.stderr.splitlines()[-1] == f"{worker_id}: drained, safe to delete"

    def undrain(self, worker_id: str) -> None:
        self.cli("undrain", worker_id)
        wait_until(
            lambda: self.worker(worker_id)["state"] == "serving", 15.0, f"{worker_id} serving"
        )

    def worker(self, worker_id: str) -> dict[str, Any]:
        response = httpx.get(
            f"{self.admin_url}/api/workers/{worker_id}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def process(self, worker_id: str) -> psutil.Process | None:
        for process in self.supervisor.children_in("worker"):
            try:
                line = process.cmdline()
            except psutil.NoSuchProcess:
                continue
            if worker_id in line and line[line.index(worker_id) - 1] == "--worker-id":
                return process
        return None

    def restart(self, worker_id: str) -> None:
        """SIGTERM the (drained) worker; the supervisor starts it again, on the same
        socket, and it comes back serving (a worker that left cleanly is new to the
        router: no drain mark outlives its deregistration)."""
        old = self.process(worker_id)
        assert old is not None
        old.send_signal(signal.SIGTERM)
        old.wait(30)

        def back() -> bool:
            new = self.process(worker_id)
            return (
                new is not None
                and new.pid != old.pid
                and self.worker(worker_id)["state"] == "serving"
            )

        wait_until(back, 30.0, f"{worker_id} restarted and registered again")


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Operator]:
    stacks = Stacks(cache_dir, tmp_path_factory.mktemp("drain-logs"))
    try:
        supervisor = stacks.start("--workers", str(len(WORKERS)), "--detokenizers", "1")
        yield Operator(supervisor, cache_dir)
    finally:
        problems = stacks.close()
        assert not problems, problems


def under_load(operator: Operator, predictor: Predictor, stem: str, act: Any) -> LoadTally:
    """Run ``act()`` while the load runs, with :data:`AROUND` exact streams before and
    after it; the load's final tally."""
    with SteadyLoad(
        operator.supervisor.url, predictor, clients=CLIENTS, tokens=TOKENS, stem=stem
    ) as load:
        wait_until(lambda: load.snapshot().sent >= AROUND, 60.0, "the load under way")
        act()
        after = load.snapshot().sent
        wait_until(lambda: load.snapshot().sent >= after + AROUND, 60.0, "load after it")
    tally = load.tally
    print(f"{stem}: {tally.sent} requests, {tally.exact} exact, {len(tally.errors)} errors")
    assert not tally.errors, f"{len(tally.errors)} of {tally.sent}: {tally.errors[:5]}"
    return tally


class TestDrainUnderLoad:
    def test_drain_and_undrain(self, operator: Operator, predictor: Predictor) -> None:
        """Drain w1 until safe to delete, undrain it: no client error, every text exact;
        meanwhile its siblings took every new connection."""

        def act() -> None:
            operator.drain("w1")
            time.sleep(1.0)  # the load goes on through w0 and w2 alone
            assert operator.worker("w1")["inflight"] == 0
            operator.undrain("w1")

        under_load(operator, predictor, "drain-undrain", act)
        assert any(line.startswith("w1: drained") for line in operator.progress)

    def test_drain_and_restart_one(self, operator: Operator, predictor: Predictor) -> None:
        """Drain w2 until safe to delete, then restart its process: it serves again."""

        def act() -> None:
            operator.drain("w2")
            operator.restart("w2")

        under_load(operator, predictor, "drain-restart", act)

    def test_rolling_restart_of_every_worker(
        self, operator: Operator, predictor: Predictor
    ) -> None:
        """Each worker in turn: drain until safe to delete, restart."""

        def act() -> None:
            for worker_id in WORKERS:
                operator.drain(worker_id)
                operator.restart(worker_id)

        under_load(operator, predictor, "rolling-restart", act)
