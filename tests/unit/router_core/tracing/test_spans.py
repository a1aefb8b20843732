"""Tests for router_core.tracing and the spans of the engine link, with an in-memory exporter.

Each test that records spans sets tracing up with ``span_exporter=`` (synchronous export)
and shuts it down at teardown, so no test leaks a tracer into the next.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from itertools import count

import pytest
import zmq
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from router_core import tracing
from router_core.engine_link import EngineEndpoints, EngineLink, Request
from router_core.engine_link.traces import RequestSpans
from router_core.tracing.config import service_name, tracing_configured
from router_core.wire import Kind, decode_header, frame_message
from router_core.wire.outputs import BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, GenerateRequest
from tests.support.eventually import wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SAMPLED = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03"
UNSAMPLED = f"00-{TRACE_ID}-{PARENT_ID}-00"
OWNER = "ipc:///tmp/sb-unit/worker-w0"
WAIT_MS = 2000
_names = count()


@pytest.fixture(autouse=True)
def no_tracing_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No OTEL_* variable from the caller's shell, and tracing shut down after each test."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    yield
    tracing.shutdown()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Tracing on for this test (role ``worker``), every span exported here at once."""
    memory = InMemorySpanExporter()
    assert tracing.setup("worker", "worker-w0", span_exporter=memory)
    return memory


def finished(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished spans by name (each name once in these tests)."""
    spans = exporter.get_finished_spans()
    by_name = {span.name: span for span in spans}
    assert len(by_name) == len(spans), [span.name for span in spans]
    return by_name


def ids(traceparent: str) -> tuple[int, int]:
    """(trace id, span id) of a traceparent."""
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


class TestConfiguration:
    """tracing_configured reads the standard OTEL_* variables; roles name services."""

    @pytest.mark.parametrize(
        ("environ", "expected"),
        [
            ({}, False),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
            ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "TRUE"}, False),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, False),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "otlp"}, True),
        ],
    )
    def test_configured(self, environ: dict[str, str], expected: bool) -> None:
        """On iff an OTLP endpoint is set, the SDK is not disabled and the exporter is otlp."""
        assert tracing_configured(environ) is expected

    def test_service_name(self) -> None:
        """A role becomes switchboard-<role>; an unknown role is refused."""
        assert service_name("detokenizer-router") == "switchboard-detokenizer-router"
        with pytest.raises(ValueError, match="role"):
            service_name("gateway")


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


class TestIsSampled:
    """is_sampled reads the flags of a W3C traceparent without parsing a context."""

    @pytest.mark.parametrize(
        ("traceparent", "expected"),
        [
            (SAMPLED, True),
            (OTHER, True),
            (UNSAMPLED, False),
            ("", False),
            ("00-short-01", False),
            (f"00-{TRACE_ID}-{PARENT_ID}-zz", False),
        ],
    )
    def test_flags(self, traceparent: str, expected: bool) -> None:
        """Sampled iff the flags' low bit is set (01 and 03 both are)."""
        assert tracing.is_sampled(traceparent) is expected


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


class TestHopSpan:
    """hop_span: the message's context is the parent."""

    def test_parent_is_the_traceparent(self, exporter: InMemorySpanExporter) -> None:
        """The span joins the incoming trace as a child of the incoming span."""
        with tracing.hop_span("router forward", SAMPLED, kind="producer", attributes={"a": 1}):
            pass
        span = finished(exporter)["router forward"]
        assert span.parent is not None
        assert (span.context.trace_id, span.parent.span_id) == ids(SAMPLED)
        assert span.kind is SpanKind.PRODUCER and span.attributes == {"a": 1}

    def test_empty_traceparent_is_a_root(self, exporter: InMemorySpanExporter) -> None:
        """Without a context and no current span, the span starts a trace."""
        with tracing.hop_span("worker POST /generate", "", kind="server") as span:
            outgoing = tracing.traceparent_of(span)
        root = finished(exporter)["worker POST /generate"]
        assert root.parent is None
        assert ids(outgoing) == (root.context.trace_id, root.context.span_id)

    @pytest.mark.parametrize("garbled", ["garbage", "00-" + "0" * 32 + "-" + "1" * 16 + "-01"])
    def test_malformed_context_makes_no_span(
        self, exporter: InMemorySpanExporter, garbled: str
    ) -> None:
        """A context that does not parse (or names the invalid all-zero trace) makes no
        span and no new trace: a hop only joins traces, it never starts one."""
        with tracing.hop_span("router forward", garbled) as span:
            assert not span.is_recording()
            assert tracing.traceparent_of(span) == ""
        manual = tracing.start_span("engine request", garbled)
        assert not manual.get_span_context().is_valid
        manual.end()
        assert exporter.get_finished_spans() == ()

    def test_exception_is_recorded(self, exporter: InMemorySpanExporter) -> None:
        """An exception escaping the block is recorded on the span and re-raised."""
        with pytest.raises(RuntimeError), tracing.hop_span("boom", SAMPLED):
            raise RuntimeError("boom")
        assert [event.name for event in finished(exporter)["boom"].events] == ["exception"]

    def test_traceparent_of_round_trip(self, exporter: InMemorySpanExporter) -> None:
        """traceparent_of names the span itself, flags kept; None gives ''."""
        with tracing.hop_span("x", OTHER) as span:
            outgoing = tracing.traceparent_of(span)
        assert outgoing.endswith("-03") and tracing.is_sampled(outgoing)
        assert ids(outgoing)[1] == finished(exporter)["x"].context.span_id
        assert tracing.traceparent_of(None) == ""


class TestBatchSpan:
    """batch_span: one span per batch, a link per sampled row context."""

    def test_single_context_is_parent_and_link(self, exporter: InMemorySpanExporter) -> None:
        """One distinct sampled context (even on several rows) is the parent and the link."""
        with tracing.batch_span("detok", [SAMPLED, "", SAMPLED, UNSAMPLED]) as span:
            assert span is not None
        batch = finished(exporter)["detok"]
        assert batch.parent is not None and batch.parent.span_id == ids(SAMPLED)[1]
        assert [(link.context.trace_id, link.context.span_id) for link in batch.links] == [
            ids(SAMPLED)
        ]
        assert batch.attributes == {"messaging.batch.message_count": 4}

    def test_many_contexts_make_a_linked_root(self, exporter: InMemorySpanExporter) -> None:
        """Several sampled contexts: a root span linked to each of them."""
        with tracing.batch_span("route", [SAMPLED, OTHER]):
            pass
        batch = finished(exporter)["route"]
        assert batch.parent is None
        linked = [(link.context.trace_id, link.context.span_id) for link in batch.links]
        assert linked == [ids(SAMPLED), ids(OTHER)]

    def test_root_ignores_the_current_span(self, exporter: InMemorySpanExporter) -> None:
        """A linked root is a root even inside another span."""
        with tracing.hop_span("outer", ""), tracing.batch_span("route", [SAMPLED, OTHER]):
            pass
        assert finished(exporter)["route"].parent is None

    def test_nothing_sampled_is_none(self, exporter: InMemorySpanExporter) -> None:
        """No sampled row: the block runs with None and no span is made."""
        with tracing.batch_span("idle", ["", UNSAMPLED, "garbage"]) as span:
            assert span is None
        assert exporter.get_finished_spans() == ()

    def test_linked_root_sampled_under_ratio_zero(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With a sampler that samples no root, a root linked to sampled rows is kept."""
        tracing.shutdown()
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
        memory = InMemorySpanExporter()
        assert tracing.setup("detokenizer-router", "detokenizer-router", span_exporter=memory)
        with tracing.hop_span("unsampled root", "") as root:
            assert tracing.traceparent_of(root) == ""
        with tracing.batch_span("route", [SAMPLED, OTHER]):
            pass
        assert [span.name for span in memory.get_finished_spans()] == ["route"]


def generate_request(rid: str, traceparent: str = SAMPLED, owner: str = OWNER) -> Request:
    return Request(
        kind=Kind.GENERATE,
        payload=GenerateRequest(rid=rid, input_ids=[1]),
        rid=rid,
        reply_to=owner,
        traceparent=traceparent,
    )


def token_rows(rids: list[str], finished: list[bool]) -> BatchTokenIDOutput:
    return BatchTokenIDOutput(
        rids=rids,
        http_worker_ipcs=[OWNER] * len(rids),
        finished_reasons=[{"type": "length"} if done else None for done in finished],
        output_ids=[[5]] * len(rids),
    )


class TestRequestSpans:
    """The engine's request spans: started per traced request, ended when it finishes."""

    def test_request_span_lifecycle(self, exporter: InMemorySpanExporter) -> None:
        """A traced request gets a child span whose context its rows carry until it ends."""
        spans = RequestSpans()
        seen = spans.on_request(generate_request("a"))
        spans.on_request(generate_request("b", traceparent=""))
        assert ids(seen.traceparent)[0] == ids(SAMPLED)[0] and seen.traceparent != SAMPLED
        assert spans.row_traces(token_rows(["b", "a"], [False, False])) == ["", seen.traceparent]
        spans.finish(token_rows(["a"], [True]))
        assert len(spans) == 0 and spans.row_traces(token_rows(["a"], [False])) == []
        span = finished(exporter)["engine request"]
        assert span.parent is not None and span.parent.span_id == ids(SAMPLED)[1]
        assert span.attributes is not None and span.attributes["switchboard.outcome"] == "length"

    def test_abort_all_and_close_end_spans(self, exporter: InMemorySpanExporter) -> None:
        """abort_all ends every span of its owner; close ends the rest."""
        spans = RequestSpans()
        for rid in ("a", "b"):
            spans.on_request(generate_request(rid))
        spans.on_request(generate_request("c", owner="ipc:///tmp/sb-unit/worker-w1"))
        abort = Request(
            kind=Kind.ABORT, payload=AbortRequest(abort_all=True), rid="", reply_to=OWNER
        )
        spans.on_request(abort)
        assert len(spans) == 1
        spans.close()
        outcomes = sorted(
            str((span.attributes or {})["switchboard.outcome"])
            for span in exporter.get_finished_spans()
        )
        assert outcomes == ["abort", "abort", "closed"]

    def test_open_spans_are_bounded(self, exporter: InMemorySpanExporter) -> None:
        """Beyond the limit the oldest request span is ended (evicted)."""
        spans = RequestSpans(limit=2)
        for rid in ("a", "b", "c"):
            spans.on_request(generate_request(rid))
        assert len(spans) == 2
        (evicted,) = exporter.get_finished_spans()
        assert evicted.attributes is not None
        assert evicted.attributes["switchboard.outcome"] == "evicted"


class TestEngineLinkTracing:
    """The engine link fills row_traces and makes the emit span by itself."""

    def test_link_traces_rows(
        self, exporter: InMemorySpanExporter, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """A traced request's rows carry its engine span; emit_batch is parented on it."""
        n = next(_names)
        endpoints = EngineEndpoints(
            inbound=f"inproc://tr-engine-{n}",
            events=f"inproc://tr-events-{n}",
            outputs=f"inproc://tr-out-{n}",
        )
        outputs = context.socket(zmq.PULL)
        outputs.bind(endpoints.outputs)
        events = context.socket(zmq.PULL)
        events.bind(endpoints.events)
        requests = context.socket(zmq.PUSH)
        try:
            with EngineLink(endpoints, context=context) as link:
                requests.connect(endpoints.inbound)
                request = GenerateRequest(rid="r1", input_ids=[1])
                requests.send_multipart(
                    frame_message(
                        Kind.GENERATE, request, rids=["r1"], reply_to=[OWNER], traceparent=SAMPLED
                    )
                )
                items = wait_until(lambda: link.poll(50), WAIT_MS / 1000, "the request")
                (item,) = items
                assert isinstance(item, Request)
                assert link.send_batch(token_rows(["r1"], [True]))
                assert outputs.poll(WAIT_MS)
                header = decode_header(outputs.recv_multipart()[0])
        finally:
            for sock in (outputs, events, requests):
                sock.close(linger=0)
        assert header.row_traces == [item.traceparent]
        spans = finished(exporter)
        engine, emit = spans["engine request"], spans["engine emit_batch"]
        assert emit.parent is not None and emit.parent.span_id == engine.context.span_id
        assert [link.context.span_id for link in emit.links] == [engine.context.span_id]
        assert engine.end_time is not None and emit.end_time is not None
        assert engine.end_time >= emit.end_time


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
