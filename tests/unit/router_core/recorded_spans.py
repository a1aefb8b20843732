"""Trace contexts and finished-span lookups shared by the tracing and engine-link tests
(the exporter the spans land in is the ``exporter`` fixture of the router_core conftest)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["OTHER", "PARENT_ID", "SAMPLED", "TRACE_ID", "UNSAMPLED", "finished", "ids"]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
SAMPLED = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03"
UNSAMPLED = f"00-{TRACE_ID}-{PARENT_ID}-00"


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
