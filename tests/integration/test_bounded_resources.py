"""Resources that grow with traffic or restarts stay bounded, shown on real processes.

* A ``switchboard detokenizer`` keeps a socket per worker it sends text to. Workers (real
  processes) that go away lose their sockets once their requests are over and the idle
  bound has passed: the detokenizer's descriptors (``/proc/<pid>/fd``) fall back to what
  they were before any worker, and what was queued for them is bounded and counted.
* Under ``switchboard up``, a worker killed and restarted again and again leaves no file
  of its dead processes in ``<run dir>/metrics``: each file belongs to a live process or
  is one of the archives, and the requests counted before each kill are still counted
  after it, exactly.
"""

from __future__ import annotations

import ast
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import zmq

from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints
from router_core.wire.codec import frame_batch
from router_core.wire.outputs import BatchTokenIDOutput
from switchboard.supervisor.metrics_dir import ARCHIVE, FOLDED_KINDS
from tests.integration.harness import SocketFactory, Stack
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import ipc_path, wait_until
from tests.integration.harness.processes import ManagedProcess
from tests.integration.harness.scrape import generate, sample_sum, scrape

pytestmark = pytest.mark.integration

WORKERS = 6
IDLE_S = 0.5
SWEEP_S = 0.1
BACKLOG = 20
#: Rows sent to each worker after it went away (more than its backlog takes).
LATE_ROWS = 50
#: The longest a close may take once due: a sweep, and slack for a loaded machine.
CLOSE_BOUND_S = IDLE_S + SWEEP_S + 5.0
FINISHED = {"type": "length", "length": 1}

#: A worker's receiving side, nothing more: a PULL at its return address, read forever.
_WORKER = """
import sys, zmq
sock = zmq.Context().socket(zmq.PULL)
sock.bind(sys.argv[1])
while True:
    sock.recv_multipart()
"""


def open_fds(pid: int) -> int:
    """How many file descriptors process ``pid`` holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def token_row(owner: str, rid: str, finished: dict[str, Any] | None) -> list[bytes]:
    """A one-row ``TOKEN_BATCH`` for request ``rid`` of ``owner``."""
    row = BatchTokenIDOutput(
        rids=[rid], http_worker_ipcs=[owner], output_ids=[[65]], finished_reasons=[finished]
    )
    return [bytes(frame) for frame in frame_batch(row)]


def start_worker(stack: Stack, index: int) -> tuple[ManagedProcess, str]:
    """A receiving worker process bound at its own ipc address."""
    address = f"ipc://{stack.run_dir}/bw-{index}"
    proc = stack.processes.spawn(
        f"bounded-worker-{index}", [sys.executable, "-c", _WORKER, address], [ipc_path(address)]
    )
    proc.expect_clean_exit = False  # it is killed on purpose (or by teardown's SIGTERM)

    def bound() -> bool:
        proc.assert_running()
        return ipc_path(address).exists()

    wait_until(bound, 15.0, f"worker {index} to bind")
    return proc, address


def final_counters(detokenizer: ManagedProcess) -> dict[str, dict[str, int]]:
    """The counters the detokenizer logs as it stops (after SIGTERM)."""
    assert detokenizer.terminate(timeout=10.0) == 0
    marker = "detokenizer stopped: "
    lines = [line for line in detokenizer.log_path.read_text().splitlines() if marker in line]
    assert lines, detokenizer.log_tail()
    counters: dict[str, dict[str, int]] = ast.literal_eval(lines[-1].split(marker, 1)[1])
    return counters


class TestDetokenizerSockets:
    """A detokenizer process closes and forgets the sockets of departed workers."""

    def test_departed_workers_sockets_are_closed_within_the_bound(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Workers with open requests keep their sockets even when gone; once their
        requests end, every socket closes within the idle bound, descriptors return to
        their count before any worker, and at most the backlog per worker was queued."""
        # Where the detokenizer's beacon goes (the router's workers socket, outside this
        # claim): bound, so its one connection is steady while descriptors are counted.
        beacons = sockets.bound(zmq.PULL, RouterEndpoints.in_run_dir(stack.run_dir).workers)
        detokenizer = stack.start_detokenizer(
            0,
            1,
            f"--destination-idle-s={IDLE_S}",
            f"--evict-interval-s={SWEEP_S}",
            f"--backlog={BACKLOG}",
        )
        endpoint = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 1).detokenizers[0]
        assert beacons.poll(15_000), "the detokenizer sent no beacon"  # its socket is up
        beacons.recv_multipart()
        bare = open_fds(detokenizer.pid)
        feed = sockets.connected(zmq.PUSH, endpoint)
        # The detokenizer holds the feed's connection from now on; count from there.
        before = wait_until(
            lambda: (fds := open_fds(detokenizer.pid)) > bare and fds,
            15.0,
            "the detokenizer to accept the feed's connection",
        )
        workers = [start_worker(stack, index) for index in range(WORKERS)]
        for _, address in workers:
            feed.send_multipart(token_row(address, "open", None))  # a request still open
        serving = wait_until(
            lambda: (fds := open_fds(detokenizer.pid)) >= before + 2 * WORKERS and fds,
            15.0,
            lambda: f"a connected socket per worker ({open_fds(detokenizer.pid)} fds)",
        )
        for proc, _ in workers:
            proc.kill()
        # Each connection closes; the sockets stay, as their requests are open.
        wait_until(
            lambda: open_fds(detokenizer.pid) <= serving - WORKERS,
            15.0,
            lambda: f"the connections closed ({open_fds(detokenizer.pid)} fds)",
        )
        assert open_fds(detokenizer.pid) >= before + WORKERS, "a socket closed too early"
        for _, address in workers:
            for index in range(LATE_ROWS):
                feed.send_multipart(token_row(address, f"late-{index}", FINISHED))
            feed.send_multipart(token_row(address, "open", FINISHED))
        last_row = time.monotonic()
        wait_until(
            lambda: open_fds(detokenizer.pid) <= before,
            CLOSE_BOUND_S,
            lambda: (
                f"every worker's socket closed ({open_fds(detokenizer.pid)} fds, {before} "
                "before any worker)"
            ),
        )
        assert time.monotonic() - last_row >= IDLE_S, "closed before the idle bound"
        counters = final_counters(detokenizer)
        assert counters["destinations_closed"] == {"idle": WORKERS}, counters
        dropped = counters["dropped"]
        late = WORKERS * (LATE_ROWS + 1)
        assert dropped["destination_idle"] == WORKERS * BACKLOG, counters
        assert dropped["backlog_full"] == late - WORKERS * BACKLOG, counters


#: Times the worker is killed and restarted.
RESTARTS = 3
#: Requests sent before each kill.
REQUESTS_PER_LIFE = 5
METRICS_DEADLINE_S = 60.0


def worker_pid(stack: AdminStack) -> int | None:
    """The pid of the one running worker, if it is running."""
    workers = stack.role_processes("worker")
    return workers[0].pid if len(workers) == 1 else None


def answered(stack: AdminStack) -> float:
    """``/generate`` requests the workers report answered."""
    return sample_sum(scrape(stack), "switchboard_http_requests_total", handler="/generate")


def stray_files(metrics_dir: Path) -> list[str]:
    """``*.db`` files that are neither an archive nor of a live process."""
    strays = []
    for path in metrics_dir.glob("*.db"):
        owner = path.stem.rpartition("_")[2]
        if owner != ARCHIVE and not (owner.isdigit() and psutil.pid_exists(int(owner))):
            strays.append(path.name)
    return strays


def counted(stack: AdminStack, total: int) -> bool:
    """Whether the answered requests are exactly ``total`` (False while the admin app's
    scrape fails)."""
    try:
        return answered(stack) == total
    except httpx.HTTPError:
        return False


def one_life(stack: AdminStack, total: int) -> int:
    """Send :data:`REQUESTS_PER_LIFE` requests, see ``total`` counted, SIGKILL the worker
    and wait until it is back with ``total`` still counted; the killed pid."""
    for _ in range(REQUESTS_PER_LIFE):
        generate(stack.base_url)
    wait_until(
        lambda: counted(stack, total),
        METRICS_DEADLINE_S,
        lambda: f"{total} requests counted (have {answered(stack)})",
    )
    old = worker_pid(stack)
    assert old is not None
    os.kill(old, signal.SIGKILL)
    wait_until(
        lambda: serving_again(stack, old) and counted(stack, total),
        METRICS_DEADLINE_S,
        "the worker restarted and serving, every request still counted",
    )
    return old


def serving_again(stack: AdminStack, old: int) -> bool:
    """Whether a new worker process (not ``old``) is registered and serving."""
    pid = worker_pid(stack)
    if pid in (None, old):
        return False
    try:
        with stack.client(stack.viewer_token) as client:
            worker = client.get("/api/workers/w0").json()
    except httpx.HTTPError:
        return False
    return bool(worker.get("pid") == pid and worker.get("state") == "serving")


class TestMetricsDirectory:
    """The multiprocess directory of ``switchboard up`` follows the live processes."""

    def test_restarts_leave_no_dead_process_files_and_keep_every_count(
        self, tmp_path: Path
    ) -> None:
        """Kill the worker three times: after each restart no file of a dead process is
        left, the archives are at most one per kind, and the answered requests counted
        before the kill are all still counted."""
        extra = ("--restart-backoff-max-s", "1.0")
        with admin_stack(tmp_path, workers=1, extra_args=extra) as stack:
            metrics_dir = stack.run_dir / "metrics"
            for life in range(1, RESTARTS + 1):
                old = one_life(stack, life * REQUESTS_PER_LIFE)
                assert not list(metrics_dir.glob(f"*_{old}.db")), "the dead worker's files stay"
                assert stray_files(metrics_dir) == []
                archives = list(metrics_dir.glob(f"*_{ARCHIVE}.db"))
                assert 0 < len(archives) <= len(FOLDED_KINDS)
