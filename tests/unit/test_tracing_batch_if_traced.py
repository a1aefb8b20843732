"""Tests for router_core.tracing.batch_span_if_traced: a batch span exactly when tracing is
on and the header carries row traces, one shared no-op otherwise."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core import tracing

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


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
    """Tracing on for this test, every span exported here at once."""
    memory = InMemorySpanExporter()
    assert tracing.setup("worker", "worker-w0", span_exporter=memory)
    return memory


class TestBatchSpanIfTraced:
    def test_off_is_one_shared_no_op_whatever_the_rows(self) -> None:
        """With tracing off, traced rows or not, the same no-op comes back and yields None."""
        untraced = tracing.batch_span_if_traced("batch", [])
        traced = tracing.batch_span_if_traced("batch", [SAMPLED, ""])
        assert untraced is traced
        with traced as span:
            assert span is None

    def test_on_without_row_traces_is_the_shared_no_op(
        self, exporter: InMemorySpanExporter
    ) -> None:
        """With tracing on, a header without row traces makes no span (the shared no-op)."""
        manager = tracing.batch_span_if_traced("batch", [])
        assert manager is tracing.batch_span_if_traced("other", [])
        with manager as span:
            assert span is None
        assert exporter.get_finished_spans() == ()

    def test_on_with_row_traces_is_the_batch_span(self, exporter: InMemorySpanExporter) -> None:
        """With tracing on and traced rows, one batch span linked to each sampled row."""
        with tracing.batch_span_if_traced("batch", [SAMPLED, "", OTHER]) as span:
            assert span is not None
        (finished,) = exporter.get_finished_spans()
        assert finished.name == "batch"
        assert len(finished.links) == 2
        assert finished.attributes is not None
        assert finished.attributes["messaging.batch.message_count"] == 3

    def test_on_with_only_unsampled_rows_makes_no_span(
        self, exporter: InMemorySpanExporter
    ) -> None:
        """Row traces that hold no sampled context make no span (as batch_span)."""
        with tracing.batch_span_if_traced("batch", ["", ""]) as span:
            assert span is None
        assert exporter.get_finished_spans() == ()

    def test_an_exception_passes_through_the_no_op(self) -> None:
        """The no-op does not swallow an exception raised in its block."""
        with pytest.raises(KeyError), tracing.batch_span_if_traced("batch", []):
            raise KeyError("row")
