"""HTTP server spans and route templates (``httpkit.spans``), over a small FastAPI app.

Spans go to an in-memory exporter; tracing is shut down after each test, so no tracer
leaks into the next.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from httpkit.spans import OTHER_ROUTE, ServerSpans
from router_core import tracing
from tests.unit.httpkit.small_app import small_app

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SAMPLED = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on (role ``admin``), every span exported here at once; off afterwards."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    memory = InMemorySpanExporter()
    assert tracing.setup("admin", "admin", span_exporter=memory)
    yield memory
    tracing.shutdown()


class TestRouteTemplates:
    """Requests are named by their route's template."""

    @pytest.mark.parametrize(
        ("method", "path", "template"),
        [
            ("GET", "/api/items/42", "/api/items/{item_id}"),
            ("POST", "/api/fail", "/api/fail"),
            ("GET", "/api/fail", "/api/fail"),  # a 405 is still that route
            ("GET", "/openapi.json", "/openapi.json"),
            ("GET", "/nowhere/42", OTHER_ROUTE),
        ],
    )
    def test_template(self, method: str, path: str, template: str) -> None:
        """Parameters stay in the template; an unknown path is ``other``."""
        _, routes = small_app()
        scope = {"type": "http", "method": method, "path": path, "root_path": ""}
        assert routes.template(scope) == template


class TestServerSpans:
    """One server span per request, parented on the incoming traceparent."""

    def test_span_named_by_role_method_and_route(self, exporter: InMemorySpanExporter) -> None:
        """`admin GET /api/items/{item_id}`, child of the caller's span, status recorded;
        the handler sees the span's own context to send on."""
        app, routes = small_app()
        app.add_middleware(ServerSpans, role="admin", routes=routes)
        with TestClient(app) as client:
            answer = client.get("/api/items/7", headers={"traceparent": SAMPLED})
        (span,) = exporter.get_finished_spans()
        assert span.name == "admin GET /api/items/{item_id}" and span.kind is SpanKind.SERVER
        assert span.parent is not None and span.parent.span_id == int("00f067aa0ba902b7", 16)
        assert span.context.trace_id == int(TRACE_ID, 16)
        assert span.attributes is not None
        assert span.attributes["http.response.status_code"] == 200
        assert span.attributes["url.path"] == "/api/items/7"
        sent_on = answer.json()["traceparent"]
        assert sent_on.split("-")[1:3] == [TRACE_ID, f"{span.context.span_id:016x}"]

    def test_no_traceparent_makes_a_root_and_a_5xx_is_an_error(
        self, exporter: InMemorySpanExporter
    ) -> None:
        """Without a traceparent the span is a root; a server error marks it an error."""
        app, routes = small_app()
        app.add_middleware(ServerSpans, role="admin", routes=routes)
        with TestClient(app, raise_server_exceptions=False) as client:
            assert client.post("/api/fail").status_code == 500
        (span,) = exporter.get_finished_spans()
        assert span.name == "admin POST /api/fail" and span.parent is None
        assert span.status.status_code is StatusCode.ERROR

    def test_malformed_traceparent_starts_a_new_trace(self, exporter: InMemorySpanExporter) -> None:
        """A traceparent that does not parse is ignored (W3C): the request is still
        traced, as a root, and the handler gets a context to send on."""
        app, routes = small_app()
        app.add_middleware(ServerSpans, role="admin", routes=routes)
        with TestClient(app) as client:
            answer = client.get("/api/items/7", headers={"traceparent": "garbage"})
        (span,) = exporter.get_finished_spans()
        assert span.parent is None and span.context.trace_id != int(TRACE_ID, 16)
        assert answer.json()["traceparent"].split("-")[1] == f"{span.context.trace_id:032x}"
