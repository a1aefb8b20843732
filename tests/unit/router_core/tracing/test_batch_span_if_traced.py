"""Tests for router_core.tracing.batch_span_if_traced: a batch span exactly when tracing is
on and the header carries row traces, one shared no-op otherwise."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core import tracing
from tests.unit.router_core.recorded_spans import OTHER, SAMPLED

pytestmark = pytest.mark.usefixtures("no_tracing_environment")


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
