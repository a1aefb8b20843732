"""Tests for the report of ``switchboard bench router`` (switchboard.bench.report):
incomplete runs are left out of the medians and flagged."""

from __future__ import annotations

import pytest

from switchboard.bench.forward import HopRun
from switchboard.bench.report import render, summarize


class TestReport:
    def test_incomplete_runs_are_left_out_and_flagged(self) -> None:
        """A run that lost messages is excluded from the medians and named in the report."""
        runs = [
            HopRun("proxy", 1024, 10, 10, 0, 1.0),
            HopRun("switchboard", 1024, 10, 10, 0, 2.0),
            HopRun("switchboard", 1024, 10, 7, 0, 0.1),
        ]
        doc = summarize(runs, [], machine=_machine(), plan={"repeats": 2}, elapsed_s=1.0)
        assert doc["forward"]["medians"]["switchboard"]["1024"] == pytest.approx(4.5)
        assert doc["forward_1k_vs_proxy"] == pytest.approx(0.5)
        assert doc["targets"]["forward_1k_vs_proxy"]["verdict"] == "BELOW"
        assert doc["split_b64_vs_naive"] is None
        assert "INCOMPLETE" in render(doc)


def _machine() -> dict[str, object]:
    return {
        "cpu_count": 2,
        "load_average_at_start": [0.0, 0.0, 0.0],
        "pyzmq": "x",
        "libzmq": "y",
    }
