"""Metrics and tracing settings of ``switchboard up``: the settings, their flags, what they put
in the children's environment, and the metrics directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.supervisor.layout import child_environment
from switchboard.supervisor.settings import SettingsError, load_settings


class TestObservabilitySettings:
    """Metrics and tracing: the settings and what they put in the children's environment."""

    def test_metrics_on_by_default_and_off_by_flag_or_env(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """metrics defaults on; --no-metrics and SWITCHBOARD_METRICS=0 turn it off."""
        assert load_settings({}).metrics is True
        assert load_settings({"metrics": False}).metrics is False
        monkeypatch.setenv("SWITCHBOARD_METRICS", "0")
        assert load_settings({}).metrics is False

    def test_metrics_flags_in_help(self) -> None:
        """`up --help` documents --metrics/--no-metrics (default on) and --otlp-endpoint."""
        import argparse

        from switchboard.supervisor.cli import add_parser

        parser = argparse.ArgumentParser()
        add_parser(parser.add_subparsers())
        up = parser.parse_args(["up", "--no-metrics", "--otlp-endpoint", "http://127.0.0.1:4318"])
        assert up.metrics is False and up.otlp_endpoint == "http://127.0.0.1:4318"
        assert "metrics" not in vars(parser.parse_args(["up"]))

    @pytest.mark.parametrize("endpoint", ["127.0.0.1:4318", "grpc://x:4317", "http://"])
    def test_otlp_endpoint_must_be_an_http_url(self, endpoint: str) -> None:
        """An OTLP endpoint that is not an http(s) URL is refused, naming the flag."""
        with pytest.raises(SettingsError, match=r"--otlp-endpoint .*http:// or https:// URL"):
            load_settings({"otlp_endpoint": endpoint})

    def test_children_get_the_metrics_dir_and_the_otlp_endpoint(self, tmp_path: Path) -> None:
        """PROMETHEUS_MULTIPROC_DIR is the stack's; OTLP endpoint set; OTEL_* pass through."""
        env = child_environment(
            {"OTEL_TRACES_SAMPLER": "always_off", "PROMETHEUS_MULTIPROC_DIR": "/elsewhere"},
            metrics_dir=tmp_path / "metrics",
            otlp_endpoint="http://127.0.0.1:4318",
        )
        assert env["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path / "metrics")
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
        assert env["OTEL_TRACES_SAMPLER"] == "always_off"

    def test_metrics_off_leaves_no_multiproc_dir(self) -> None:
        """With metrics off no child records, whatever the supervisor's environment says."""
        env = child_environment({"PROMETHEUS_MULTIPROC_DIR": "/elsewhere"})
        assert "PROMETHEUS_MULTIPROC_DIR" not in env
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env

    def test_metrics_directory_is_wiped_then_removed(self, tmp_path: Path) -> None:
        """prepare() empties a previous run's directory; remove() deletes it."""
        from switchboard.supervisor.metrics_dir import MetricsDirectory

        directory = MetricsDirectory(tmp_path / "metrics")
        directory.prepare()
        (directory.path / "counter_123.db").write_bytes(b"old run")
        assert list(directory.prepare().iterdir()) == []
        directory.retire(123)  # nothing to retire: no error
        directory.remove()
        assert not directory.path.exists()
