"""Tests for router_core.tracing's provider: off without an endpoint (and no SDK loaded),
setup idempotent and named, shutdown safe twice and bounded against a dead collector.

Each test that records spans sets tracing up with ``span_exporter=`` (synchronous export)
and shuts it down at teardown, so no test leaks a tracer into the next.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core import tracing
from tests.unit.router_core.recorded_spans import SAMPLED, finished

pytestmark = pytest.mark.usefixtures("no_tracing_environment")


class TestOff:
    """With tracing off nothing is recorded and no SDK is loaded."""

    def test_setup_without_endpoint_is_off(self) -> None:
        """setup returns False and enabled() stays False without an endpoint."""
        assert tracing.setup("engine", "engine") is False
        assert tracing.enabled() is False

    def test_no_spans_when_off(self) -> None:
        """hop_span gives a non-recording span, batch_span None, start_span an invalid span."""
        with tracing.hop_span("x", SAMPLED) as span:
            assert not span.is_recording()
        with tracing.batch_span("y", [SAMPLED]) as batch:
            assert batch is None
        manual = tracing.start_span("z", SAMPLED)
        assert not manual.get_span_context().is_valid
        manual.end()
        assert tracing.traceparent_of(manual) == ""

    def test_sdk_not_imported_when_off(self) -> None:
        """A process whose setup finds no endpoint never imports the OpenTelemetry SDK."""
        code = (
            "import sys\nfrom router_core import tracing\n"
            "assert tracing.setup('engine', 'engine') is False\n"
            "with tracing.batch_span('b', ['" + SAMPLED + "']) as s: assert s is None\n"
            "assert tracing.is_sampled('" + SAMPLED + "')\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        assert out.stdout.strip() == "[]"


class TestSetup:
    """setup is idempotent, names the resource, and shutdown is safe twice."""

    def test_resource_and_idempotence(self, exporter: InMemorySpanExporter) -> None:
        """A second setup changes nothing; spans carry service.name and instance id."""
        assert tracing.setup("engine", "engine") is True
        with tracing.hop_span("worker op", ""):
            pass
        resource = finished(exporter)["worker op"].resource.attributes
        assert resource["service.name"] == "switchboard-worker"
        assert resource["service.instance.id"] == "worker-w0"
        assert resource["process.pid"] == os.getpid()

    def test_shutdown_twice_then_off(self, exporter: InMemorySpanExporter) -> None:
        """After shutdown tracing is off; a second shutdown does nothing."""
        tracing.shutdown()
        tracing.shutdown()
        assert not tracing.enabled()
        with tracing.batch_span("b", [SAMPLED]) as batch:
            assert batch is None


class TestShutdownBound:
    """A process never hangs on its way out because the collector is unreachable."""

    def test_shutdown_with_dead_endpoint_is_bounded(self) -> None:
        """With nobody listening, shutdown gives up after FLUSH_TIMEOUT_S, not the
        exporter's 10 s retries."""
        code = (
            "import time\nfrom router_core import tracing\n"
            "from router_core.tracing.provider import FLUSH_TIMEOUT_S\n"
            "assert tracing.setup('engine', 'engine')\n"
            "with tracing.hop_span('x', ''): pass\n"
            "start = time.monotonic(); tracing.shutdown()\n"
            "print(time.monotonic() - start, FLUSH_TIMEOUT_S)\n"
        )
        with socket.socket() as probe:  # a port that refuses: bound, never listening
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
            )
        took, bound = map(float, out.stdout.split())
        assert took < bound + 1.0
