"""Tests for router_core.tracing.config: whether the OTEL_* variables turn tracing on, and
the service name of each role."""

from __future__ import annotations

import pytest

from router_core.tracing.config import service_name, tracing_configured

pytestmark = pytest.mark.usefixtures("no_tracing_environment")


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
