"""A real ``switchboard up`` tracing to a collector that is not there yet, then is.

Every process exports to a refusing loopback port at first: each logs exactly one
warning naming the endpoint (no line of the SDK's, whose retries would log every second
or two), and, once a real receiver listens on that port, one recovery line; the spans of
every role on a request's path then arrive.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest

from switchboard.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.integration.harness import wait_until
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.supervisor import Supervisor, generate, stack_env, up_argv
from tests.integration.test_tracing import PATH_SERVICES

pytestmark = pytest.mark.integration

#: One quiet-export line: the process's pid, the endpoint, what it says.
EXPORT_LINE = re.compile(
    r"\[(\d+)\]: OTLP export to (\S+) (failing|still failing|recovered|at shutdown)"
)
#: How long the stack runs with the collector down: long enough for many failed batches
#: (one every 200 ms, one try each: some 20 a process).
OUTAGE_S = 4.0


def export_lines(stderr: str) -> dict[str, list[tuple[int, str]]]:
    """The quiet-export lines by what they say: (pid, endpoint) each."""
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for match in EXPORT_LINE.finditer(stderr):
        found[match.group(3)].append((int(match.group(1)), match.group(2)))
    return found


def requests_for(url: str, seconds: float) -> None:
    """Generation requests, one after the other, for ``seconds`` (traffic to trace)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert generate(url, timeout=30).status_code == 200


class TestCollectorDown:
    def test_one_warning_each_then_one_recovery_line(
        self, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """4 s of traffic against a refusing port: one warning per process, no SDK
        line; a receiver on that port: one recovery line per process that warned, and
        spans from every role."""
        for name in list(os.environ):
            if name.startswith("OTEL_"):
                monkeypatch.delenv(name)
        probe = socket.socket()  # refuses connections: bound, not listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        endpoint = f"http://127.0.0.1:{port}/v1/traces"
        admin_port = free_port()
        argv = up_argv(
            "--port", str(free_port()), "--admin-port", str(admin_port),
            "--otlp-endpoint", f"http://127.0.0.1:{port}",
        )  # fmt: skip
        # Batches every 200 ms, each given up after one try: many failures in 4 s.
        env = stack_env(cache_dir) | {
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
        }
        supervisor = Supervisor(argv, env, tmp_path)
        spans: list[ReceivedSpan] = []
        try:
            with probe:
                supervisor.wait_serving()
                requests_for(supervisor.url, OUTAGE_S)
                during = export_lines(supervisor.stderr())
                sdk_lines = [
                    line for line in supervisor.stderr().splitlines() if "opentelemetry" in line
                ]
            with OtlpReceiver(port=port) as receiver:

                def recovered() -> bool:
                    # Spans from the path and from the admin app, so each exports again.
                    generate(supervisor.url, timeout=30)
                    httpx.get(f"http://127.0.0.1:{admin_port}/health", trust_env=False)
                    lines = export_lines(supervisor.stderr())
                    warned = {pid for pid, _ in lines["failing"]}
                    return warned <= {pid for pid, _ in lines["recovered"]}

                wait_until(
                    recovered,
                    60.0,
                    lambda: f"no recovery line from every process: {supervisor.stderr()[-3000:]}",
                )
                spans = receiver.wait_for(
                    lambda got: {span.service_name for span in got} >= PATH_SERVICES, timeout_s=30
                )
            after = export_lines(supervisor.stderr())
            assert supervisor.terminate() == 0
        finally:
            problems = supervisor.shutdown()
        assert problems == []
        assert sdk_lines == []
        warned = [pid for pid, _ in during["failing"]]
        assert len(warned) >= len(PATH_SERVICES), during
        assert len(warned) == len(set(warned)), f"a process warned twice: {during['failing']}"
        assert {url for lines in during.values() for _, url in lines} == {endpoint}
        assert during["still failing"] == [], "no summary within the first minute"
        recovered_pids = [pid for pid, _ in after["recovered"]]
        assert sorted(recovered_pids) == sorted(set(recovered_pids)), after["recovered"]
        assert set(warned) <= set(recovered_pids)
        assert {span.service_name for span in spans} >= PATH_SERVICES
