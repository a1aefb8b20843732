"""Tests for the worker's observers (switchboard.worker.observe): without tracing and
metrics the middleware is not installed at all."""

from __future__ import annotations

from fastapi.testclient import TestClient

from httpkit.spans import ServerSpans
from router_core import tracing
from switchboard.worker.metrics import NO_METRICS
from switchboard.worker.observe import HttpMetrics, install_observers
from tests.unit.httpkit.small_app import small_app


class TestInstallObservers:
    """install_observers: HTTP metrics only with metrics on, server spans only with tracing on."""

    def test_tracing_off_installs_nothing(self) -> None:
        """With tracing and metrics off a worker adds no observing middleware at all."""
        assert not tracing.enabled()
        app, routes = small_app()
        install_observers(app, NO_METRICS, routes)
        kinds = {entry.cls for entry in app.user_middleware}
        assert ServerSpans not in kinds and HttpMetrics not in kinds
        with TestClient(app) as client:
            assert client.get("/api/items/1").json()["traceparent"] == ""
