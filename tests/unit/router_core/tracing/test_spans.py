"""Tests for router_core.tracing's spans: sampled flags, hop spans parented on the
message's context, and batch spans linked to every sampled row, with an in-memory exporter.

Each test that records spans sets tracing up with ``span_exporter=`` (synchronous export)
and shuts it down at teardown, so no test leaks a tracer into the next.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from router_core import tracing
from tests.unit.router_core.recorded_spans import (
    OTHER,
    PARENT_ID,
    SAMPLED,
    TRACE_ID,
    UNSAMPLED,
    finished,
    ids,
)

pytestmark = pytest.mark.usefixtures("no_tracing_environment")


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
