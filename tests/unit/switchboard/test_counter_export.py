"""Tests for exporting a process's drop and reject counters to Prometheus by delta."""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.counters import Counters
from switchboard.counter_export import EXPORTED, CounterExport, _families


def exported(name: str, process: str) -> dict[str, float]:
    """``{reason: value}`` of one exported family for ``process`` in this process."""
    family = _families()[name]
    return {
        sample.labels["reason"]: sample.value
        for metric in family.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["process"] == process
    }


@pytest.fixture
def multiproc_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Metrics on, as ``switchboard up`` sets them for a child."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    return tmp_path


class TestCounterExport:
    def test_off_without_the_metrics_directory(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without PROMETHEUS_MULTIPROC_DIR nothing is exported (and sync is harmless)."""
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
        export = CounterExport("test-off")
        counters = Counters()
        counters.add("dropped", "dead_worker")
        export.sync(counters)
        assert not export.enabled
        assert exported("dropped", "test-off") == {}

    def test_each_sync_adds_what_grew(self, multiproc_env: Path) -> None:
        """Counts reach the families once, however often sync runs; growth is added."""
        export = CounterExport("test-delta")
        counters = Counters()
        counters.add("dropped", "dead_worker", 3)
        counters.add("rejected", "bad_header")
        counters.add("sent", "token_batch", 100)  # not exported
        export.sync(counters)
        export.sync(counters)
        counters.add("dropped", "dead_worker", 2)
        counters.add("dropped", "backlog_full")
        export.sync(counters)
        assert exported("dropped", "test-delta") == {"dead_worker": 5.0, "backlog_full": 1.0}
        assert exported("rejected", "test-delta") == {"bad_header": 1.0}

    def test_names_pick_what_is_exported(self, multiproc_env: Path) -> None:
        """A worker exports rejects only; an unknown name is refused."""
        export = CounterExport("test-names", ("rejected",))
        counters = Counters()
        counters.add("dropped", "unknown_request")
        counters.add("rejected", "bad_payload")
        export.sync(counters)
        assert exported("dropped", "test-names") == {}
        assert exported("rejected", "test-names") == {"bad_payload": 1.0}
        with pytest.raises(ValueError, match="cannot export"):
            CounterExport("test-names", ("sent",))
        assert set(EXPORTED) == {
            "dropped",
            "rejected",
            "lost_requests",
            "resent_requests",
            "refused",
        }

    def test_lost_requests_are_exported_by_cause(self, multiproc_env: Path) -> None:
        """A worker's lost requests reach their family with the cause as the reason."""
        export = CounterExport("test-lost", ("lost_requests", "resent_requests"))
        counters = Counters()
        counters.add("lost_requests", "idle_timeout", 2)
        counters.add("resent_requests", "router_restarted")
        export.sync(counters)
        assert exported("lost_requests", "test-lost") == {"idle_timeout": 2.0}
        assert exported("resent_requests", "test-lost") == {"router_restarted": 1.0}
