"""Tests for router_core.tracing.quiet_export: while the collector is down a process logs
one warning, then a summary per period, then one line when export recovers -- never the
SDK's per-retry records. The pure health first, then the wrapper around an exporter that
logs as the SDK's does, then a real process exporting to a closed loopback port until a
real receiver starts on it."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from router_core.tracing.config import traces_endpoint
from router_core.tracing.quiet_export import (
    ExportHealth,
    QuietSpanExporter,
    _SdkRecords,
    failure_reason,
)
from switchboard.otlp_receiver import OtlpReceiver

ENDPOINT = "http://127.0.0.1:4318/v1/traces"
REFUSED = (
    "Transient error HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded "
    "with url: /v1/traces (Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1',"
    ' port=9): Failed to establish a new connection: [Errno 111] Connection refused")) '
    "encountered while exporting spans batch, retrying in 0.96s."
)


class TestFailureReason:
    """The reason a line names is short: the OS error, or the HTTP status."""

    def test_connection_refused(self) -> None:
        """urllib3's long message comes down to the errno text."""
        assert failure_reason([REFUSED, "Failed to export spans batch due to timeout"]) == (
            "Connection refused"
        )

    def test_http_status(self) -> None:
        """A refused export names its status code and reason."""
        message = "Failed to export spans batch code: 404, reason: Not Found"
        assert failure_reason([message]) == "HTTP 404 Not Found"

    def test_gave_up_without_retry(self) -> None:
        """With no retry tried (the timeout too short), the SDK's own words say why."""
        message = "Failed to export spans batch due to timeout, max retries or shutdown."
        assert failure_reason([message]) == "timeout, max retries or shutdown"

    def test_fallbacks(self) -> None:
        """Otherwise the first message (cut to 200 characters), or a generic phrase."""
        assert failure_reason(["x" * 300, "y"]) == "x" * 200
        assert failure_reason([]) == "export failed"


class TestExportHealth:
    """Outcomes in, lines out: one warning, a summary per period, one recovery line."""

    def test_quiet_while_up(self) -> None:
        """Successes with no failure before say nothing."""
        health = ExportHealth(ENDPOINT)
        assert health.succeeded(wall=0.0) is None
        assert not health.failing

    def test_outage_lines(self) -> None:
        """First failure warns naming the endpoint; the next within the period are
        silent; then one summary with the counts; the recovery line totals them."""
        health = ExportHealth(ENDPOINT, summary_every_s=60.0)
        first = health.failed(10, "Connection refused", now=100.0, wall=0.0)
        assert first is not None
        assert first.startswith(f"OTLP export to {ENDPOINT} failing (Connection refused)")
        assert health.failed(5, "Connection refused", now=130.0, wall=30.0) is None
        assert health.failed(5, "Connection refused", now=159.0, wall=59.0) is None
        summary = health.failed(2, "Connection refused", now=160.0, wall=60.0)
        assert summary == (
            f"OTLP export to {ENDPOINT} still failing (Connection refused): "
            "4 batches / 22 spans dropped since 1970-01-01T00:00:00Z"
        )
        assert health.failed(1, "HTTP 503 Busy", now=200.0, wall=100.0) is None
        assert health.failed(1, "HTTP 503 Busy", now=220.0, wall=120.0) is not None
        recovered = health.succeeded(wall=130.0)
        assert recovered == (
            f"OTLP export to {ENDPOINT} recovered at 1970-01-01T00:02:10Z: "
            "6 batches / 24 spans dropped since 1970-01-01T00:00:00Z"
        )
        assert health.succeeded(wall=131.0) is None
        assert health.failed(1, "x", now=300.0, wall=200.0) is not None, "a new outage warns"

    def test_queue_overflow_noted_only_while_failing(self) -> None:
        """The processor's queue-full warning passes while export works, and is folded
        into the lines while it fails."""
        health = ExportHealth(ENDPOINT, summary_every_s=1.0)
        assert health.queue_overflowed() is False
        health.failed(1, "r", now=0.0, wall=0.0)
        assert health.queue_overflowed() is True
        summary = health.failed(1, "r", now=2.0, wall=2.0)
        assert summary is not None and "the span queue overflowed too" in summary

    def test_closing(self) -> None:
        """Shutdown after a failed batch says what was lost; otherwise nothing."""
        health = ExportHealth(ENDPOINT)
        assert health.closing() is None
        health.failed(3, "r", now=0.0, wall=0.0)
        assert health.closing() == (
            f"OTLP export to {ENDPOINT} at shutdown: "
            "1 batches / 3 spans dropped since 1970-01-01T00:00:00Z, none exported since"
        )


class SdkLikeExporter(SpanExporter):
    """Fails (or not) as told, logging on the SDK exporter's logger as it does."""

    def __init__(self) -> None:
        self.fail = True
        self.raise_error = False
        self.shutdowns = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.raise_error:
            raise OSError("socket exploded")
        if not self.fail:
            return SpanExportResult.SUCCESS
        sdk = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        sdk.warning("%s", REFUSED)
        sdk.error("Failed to export spans batch due to timeout, max retries or shutdown.")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def records() -> Iterator[_SdkRecords]:
    """A record filter of the test's own on the SDK's loggers, removed afterwards."""
    records = _SdkRecords()
    records.install()
    yield records
    for name in list(logging.Logger.manager.loggerDict):
        logging.getLogger(name).removeFilter(records)


class TestQuietSpanExporter:
    """The wrapper logs what the health says and nothing the SDK says while exporting."""

    def test_outage_logged_as_three_lines(
        self, records: _SdkRecords, caplog: pytest.LogCaptureFixture
    ) -> None:
        """20 failed batches over 2.5 periods, then a success: one warning, two
        summaries, one info; none of the SDK's 40 records."""
        inner = SdkLikeExporter()
        now = [0.0]
        health = ExportHealth(ENDPOINT, summary_every_s=10.0)
        records.health = health
        exporter = QuietSpanExporter(
            inner, health, records=records, clock=lambda: now[0], wall=lambda: now[0]
        )
        caplog.set_level(logging.INFO)
        for step in range(20):
            now[0] = step * 1.25
            assert exporter.export([]) is SpanExportResult.FAILURE
        inner.fail = False
        assert exporter.export([]) is SpanExportResult.SUCCESS
        lines = [(r.levelname, r.getMessage()) for r in caplog.records]
        assert [level for level, _ in lines] == ["WARNING", "WARNING", "WARNING", "INFO"]
        assert "failing (Connection refused)" in lines[0][1]
        assert "still failing (Connection refused): 9 batches" in lines[1][1]
        assert "recovered" in lines[3][1] and "20 batches" in lines[3][1]

    def test_raising_exporter_is_a_failed_batch(
        self, records: _SdkRecords, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An exception from the exporter becomes FAILURE and names its error."""
        inner = SdkLikeExporter()
        inner.raise_error = True
        exporter = QuietSpanExporter(inner, ExportHealth(ENDPOINT), records=records)
        assert exporter.export([]) is SpanExportResult.FAILURE
        assert "failing (OSError: socket exploded)" in caplog.records[-1].getMessage()

    def test_other_threads_and_records_pass(
        self, records: _SdkRecords, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A record the SDK makes outside an export is left alone."""
        logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").warning(
            "Exporter already shutdown, ignoring batch"
        )
        assert [r.getMessage() for r in caplog.records] == [
            "Exporter already shutdown, ignoring batch"
        ]

    def test_shutdown_once(self, records: _SdkRecords) -> None:
        """A second shutdown (the provider's bounded one, then the SDK's) is a no-op."""
        inner = SdkLikeExporter()
        exporter = QuietSpanExporter(inner, ExportHealth(ENDPOINT), records=records)
        exporter.shutdown()
        exporter.shutdown()
        assert inner.shutdowns == 1

    def test_last_tries_end_at_the_first_failed_attempt(
        self, records: _SdkRecords, caplog: pytest.LogCaptureFixture
    ) -> None:
        """At shutdown a working export goes on working; the first failed attempt (the
        SDK's record of it) shuts the inner exporter, once, which ends its retries. Later
        batches fail untried and are counted in the shutdown line."""
        inner = SdkLikeExporter()
        inner.fail = False
        exporter = QuietSpanExporter(inner, ExportHealth(ENDPOINT), records=records)
        exporter.last_tries()
        assert exporter.export([]) is SpanExportResult.SUCCESS and inner.shutdowns == 0
        inner.fail = True
        assert exporter.export([]) is SpanExportResult.FAILURE and inner.shutdowns == 1
        inner.fail = False  # a batch after that is dropped, not sent, however inner is
        assert exporter.export(SPANS) is SpanExportResult.FAILURE
        exporter.shutdown()
        assert inner.shutdowns == 1
        assert "at shutdown: 2 batches / 2 spans dropped" in caplog.records[-1].getMessage()

    def test_no_try_while_failing(self, records: _SdkRecords) -> None:
        """With the last batch failed, last_tries shuts the inner exporter at once (an
        export retrying in another thread ends) and queued batches are not tried."""
        inner = SdkLikeExporter()
        exporter = QuietSpanExporter(inner, ExportHealth(ENDPOINT), records=records)
        exporter.export([])
        assert inner.shutdowns == 0
        exporter.last_tries()
        assert inner.shutdowns == 1
        inner.raise_error = True  # would be a new failure reason if it were asked
        assert exporter.export(SPANS) is SpanExportResult.FAILURE
        assert "2 batches / 2 spans dropped" in (exporter.health.closing() or "")


#: Two spans, as a dropped batch counts them (only their number is read).
SPANS: Sequence[ReadableSpan] = [ReadableSpan("a"), ReadableSpan("b")]


def test_traces_endpoint() -> None:
    """The endpoint lines name is the one the SDK posts to."""
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1/"}) == (
        "http://h:1/v1/traces"
    )
    assert (
        traces_endpoint(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "x"}
        )
        == "x"
    )
    assert traces_endpoint({}) == "http://localhost:4318/v1/traces"


#: A process that traces a span every 20 ms until killed, logging to stderr.
TRACING_PROCESS = """
import logging, sys, time
logging.basicConfig(
    level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
)
from router_core.tracing import quiet_export
quiet_export.SUMMARY_EVERY_S = 2.0
from router_core import tracing
assert tracing.setup("engine", "engine")
print("tracing", flush=True)
while True:
    with tracing.hop_span("tick", ""):
        pass
    time.sleep(0.02)
"""


#: A process tracing a span every 20 ms in a thread; a line on stdin shuts tracing down
#: and prints how long that took.
STOPPING_PROCESS = """
import logging, sys, threading, time
logging.basicConfig(
    level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
)
from router_core import tracing
assert tracing.setup("engine", "engine")

def tick():
    while tracing.enabled():
        with tracing.hop_span("tick", ""):
            pass
        time.sleep(0.02)

threading.Thread(target=tick, daemon=True).start()
print("tracing", flush=True)
sys.stdin.readline()
started = time.monotonic()
tracing.shutdown()
print(f"shutdown {time.monotonic() - started:.3f}", flush=True)
"""


class TestRealProcess:
    """A real process, the real OTLP exporter, a closed port, then a real receiver."""

    @pytest.mark.parametrize("failing_before", [True, False], ids=["failing", "first-try"])
    def test_shutdown_does_not_sit_out_retries(self, failing_before: bool) -> None:
        """Export to a refusing port (the SDK's default 10 s of retries per batch):
        shutdown takes well under its 3 s flush bound, which it used to take whole, and
        says what was dropped. ``failing``: batches failed before, one is retrying when
        shutdown begins; ``first-try``: nothing exported before shutdown (a 60 s batch
        delay), its first attempt is refused."""
        delay = "100" if failing_before else "60000"
        with _refused_child(STOPPING_PROCESS, OTEL_BSP_SCHEDULE_DELAY=delay) as child:
            process, lines = child.process, child.lines
            assert process.stdin is not None and process.stdout is not None
            if failing_before:
                _wait_line(lines, "failing (Connection refused)", timeout_s=15)
            # Spans queue meanwhile; with failing_before, the next batch is retried.
            time.sleep(0.5)
            process.stdin.write("stop\n")
            process.stdin.flush()
            answer = process.stdout.readline()
            if not failing_before:
                _wait_line(lines, "failing (Connection refused)", timeout_s=10)
            closing = _wait_line(lines, "at shutdown", timeout_s=10)
        elapsed = float(answer.split()[1])
        assert elapsed < 1.5, answer
        assert re.search(r"at shutdown: \d+ batches / \d+ spans dropped", closing), closing

    def test_closed_port_then_receiver(self) -> None:
        """Against a refusing port: one warning, then summaries at most one per period
        (2 s here), no SDK line; once a receiver listens there, one recovery line and the
        process's spans arrive."""
        with _refused_child(
            TRACING_PROCESS,
            OTEL_BSP_SCHEDULE_DELAY="100",
            # 2 s: one retry (after about 1 s) before each batch is given up, so the
            # warning has the refusal to name.
            OTEL_EXPORTER_OTLP_TIMEOUT="2",
        ) as child:
            during = _lines_until(child.lines, "still failing", count=2, timeout_s=30)
            child.probe.close()
            with OtlpReceiver(port=child.port) as receiver:
                spans = receiver.wait_for(
                    lambda spans: any(s.service_name == "switchboard-engine" for s in spans),
                    timeout_s=15,
                )
                recovered = _wait_line(child.lines, "recovered", timeout_s=15)
        endpoint = f"http://127.0.0.1:{child.port}/v1/traces"
        texts = [text for _, text in during]
        assert not [line for line in texts if "opentelemetry" in line], texts
        failing = [line for line in texts if f"OTLP export to {endpoint} failing" in line]
        summaries = [(at, line) for at, line in during if "still failing" in line]
        assert len(failing) == 1, texts
        assert "(Connection refused)" in failing[0]
        assert len(texts) == 1 + len(summaries), texts
        # A period apart at least (less a margin for when the reader thread saw them).
        assert summaries[1][0] - summaries[0][0] >= 1.5, during
        assert re.search(
            r"still failing \(Connection refused\): \d+ batches / \d+ spans", summaries[0][1]
        )
        assert recovered.startswith(
            f"INFO router_core.tracing.quiet_export: OTLP export to {endpoint} recovered"
        )
        assert spans


@dataclass
class _Child:
    """A tracing process, its refusing port (``probe``: bound, not listening) and its
    stderr lines as they arrive (``(monotonic time, line)``)."""

    process: subprocess.Popen[str]
    probe: socket.socket
    port: int
    lines: queue.Queue[tuple[float, str]]


@contextlib.contextmanager
def _refused_child(script: str, **otel: str) -> Iterator[_Child]:
    """A real process running ``script`` (which prints ``tracing`` once set up), its
    OTLP export pointed at a loopback port that refuses connections, the ``OTEL_*``
    variables ``otel`` set; killed on the way out."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", **otel}
    with (
        probe,
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as process,
    ):
        try:
            assert process.stdout is not None and process.stderr is not None
            stderr = process.stderr
            lines: queue.Queue[tuple[float, str]] = queue.Queue()

            def read() -> None:
                for row in stderr:
                    lines.put((time.monotonic(), row.rstrip("\n")))

            threading.Thread(target=read, daemon=True).start()
            assert process.stdout.readline() == "tracing\n"
            yield _Child(process, probe, port, lines)
        finally:
            process.kill()


def _lines_until(
    lines: queue.Queue[tuple[float, str]], needle: str, count: int, timeout_s: float
) -> list[tuple[float, str]]:
    """Every line up to the ``count``-th holding ``needle``; AssertionError after
    ``timeout_s`` without it."""
    deadline = time.monotonic() + timeout_s
    seen: list[tuple[float, str]] = []
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            seen.append(lines.get(timeout=remaining))
        except queue.Empty:
            break
        if sum(needle in line for _, line in seen) == count:
            return seen
    raise AssertionError(f"not {count} lines with {needle!r} in {timeout_s} s: {seen}")


def _wait_line(lines: queue.Queue[tuple[float, str]], needle: str, timeout_s: float) -> str:
    """The next line holding ``needle`` (those before it are dropped)."""
    return _lines_until(lines, needle, 1, timeout_s)[-1][1]
