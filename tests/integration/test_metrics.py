"""The admin app's ``/metrics`` over a real ``switchboard up`` under load.

``promtool check metrics`` accepts the live exposition; a worker killed with SIGKILL and
restarted by the supervisor leaves no stale series (its in-flight gauge is retired, one
``switchboard_worker_up`` series per worker id) and nothing is counted twice (the
requests the workers report are exactly the requests sent, before and after the restart).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import missing, wait_until
from tests.integration.harness.scrape import generate, sample_sum, samples, scrape, some_load

pytestmark = pytest.mark.integration

PROMTOOL = Path("/usr/bin/promtool")
#: Generation requests sent in each round of the counting test.
ROUND = 20
#: Long streams, to be in flight when a worker is killed (4000 tokens at 5 ms a step).
STREAM_TOKENS = 4000
STREAMS = 6
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """One stack with operator and viewer tokens, for the read-only tests."""
    with admin_stack(tmp_path_factory) as running:
        yield running


class TestExposition:
    """The live output is valid and access follows the token rules."""

    def test_promtool_accepts_the_live_output(self, stack: AdminStack) -> None:
        """`promtool check metrics` passes on /metrics of a stack under load."""
        if not PROMTOOL.exists():
            missing("promtool (Debian package prometheus)")
        some_load(stack)
        text = scrape(stack)
        assert sample_sum(text, "switchboard_router_up") == 2
        checked = subprocess.run(
            [str(PROMTOOL), "check", "metrics"],
            input=text.encode(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()

    def test_viewer_tokens_configured_means_a_token_is_needed(self, stack: AdminStack) -> None:
        """With viewer tokens configured, /metrics is 401 without a token and 200 with one."""
        with httpx.Client(base_url=stack.admin_url, timeout=10.0, trust_env=False) as client:
            assert client.get("/metrics").status_code == 401
        assert "switchboard_router_up" in scrape(stack, stack.viewer_token)
        assert "switchboard_router_up" in scrape(stack, stack.operator_token)


class Streams:
    """Long streaming completions held open from threads until :meth:`close`."""

    def __init__(self, base_url: str, count: int) -> None:
        self.base_url = base_url
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._hold, daemon=True) for _ in range(count)]

    def _hold(self) -> None:
        body = {
            "model": "switchboard-sim",
            "prompt": "keep going",
            "max_tokens": STREAM_TOKENS,
            "ignore_eos": True,
            "stream": True,
        }
        # Each its own connection, so the kernel spreads them over the workers; a stream
        # whose worker is killed ends with a transport error, which is expected here.
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.Client(base_url=self.base_url, timeout=60.0, trust_env=False) as client,
            client.stream("POST", "/v1/completions", json=body) as answer,
        ):
            for _ in answer.iter_lines():
                if self.stop.is_set():
                    return

    def __enter__(self) -> Streams:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Leave every stream (the server sees the disconnect) and wait for the threads."""
        self.stop.set()
        for thread in self.threads:
            thread.join(DEADLINE_S)
            assert not thread.is_alive(), "a stream did not end"


def worker_process(stack: AdminStack, worker_id: str) -> psutil.Process | None:
    """The running ``switchboard worker --worker-id worker_id`` process, if any."""
    for process in stack.role_processes("worker"):
        with contextlib.suppress(psutil.NoSuchProcess):
            argv = process.cmdline()
            if argv[argv.index("--worker-id") + 1] == worker_id:
                return process
    return None


def generation_count(stack: AdminStack) -> float:
    """``/generate`` requests the workers report answered, over every worker and status."""
    return sample_sum(scrape(stack), "switchboard_http_requests_total", handler="/generate")


def send_round(stack: AdminStack, expected_total: int) -> None:
    """Send :data:`ROUND` generations; the workers then report exactly ``expected_total``."""
    for _ in range(ROUND):
        generate(stack.base_url)
    wait_until(
        lambda: generation_count(stack) >= expected_total,
        DEADLINE_S,
        lambda: f"{expected_total} /generate counted (have {generation_count(stack)})",
    )
    assert generation_count(stack) == expected_total


class TestWorkerRestart:
    """SIGKILL one worker mid-stream; the supervisor restarts it; the metrics stay true."""

    def test_no_stale_series_and_no_double_counting(self, tmp_path: Path) -> None:
        """In-flight of the killed process is retired, each worker id has one up series,
        and the answered requests add up to exactly what was sent, across the restart."""
        with admin_stack(tmp_path) as stack:
            send_round(stack, ROUND)
            with Streams(stack.base_url, STREAMS):

                def busiest() -> str | None:
                    in_flight = samples(scrape(stack), "switchboard_http_requests_in_flight")
                    if sum(value for _, value in in_flight) < STREAMS:
                        return None
                    return max(in_flight, key=lambda sample: sample[1])[0]["worker"]

                victim_id = wait_until(busiest, DEADLINE_S, "every stream in flight")
                victim = worker_process(stack, victim_id)
                assert victim is not None
                old_pid = victim.pid
                victim.send_signal(signal.SIGKILL)

                def restarted() -> bool:
                    process = worker_process(stack, victim_id)
                    if process is None or process.pid == old_pid:
                        return False
                    with stack.client(stack.viewer_token) as client:
                        worker = client.get(f"/api/workers/{victim_id}").json()
                    return bool(worker.get("pid") == process.pid and worker["state"] == "serving")

                wait_until(restarted, 60.0, f"{victim_id} restarted and serving")
            metrics_dir = stack.run_dir / "metrics"
            assert not (metrics_dir / f"gauge_livesum_{old_pid}.db").exists()
            wait_until(
                lambda: sample_sum(scrape(stack), "switchboard_http_requests_in_flight") == 0,
                DEADLINE_S,
                "no request in flight once the streams are closed",
            )
            text = scrape(stack)
            up = samples(text, "switchboard_worker_up")
            assert sorted(labels["worker"] for labels, _ in up) == ["w0", "w1"]
            assert all(value == 1 for _, value in up)
            in_flight = samples(text, "switchboard_http_requests_in_flight")
            assert sorted(labels["worker"] for labels, _ in in_flight) == ["w0", "w1"]
            assert generation_count(stack) == ROUND
            send_round(stack, 2 * ROUND)
