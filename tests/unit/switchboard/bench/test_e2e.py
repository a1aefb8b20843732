"""Tests for ``switchboard bench e2e``'s suite (switchboard.bench.e2e): one tiny
one-configuration run against a real ``switchboard up`` stack (no timing is asserted:
these machines are noisy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchboard.bench.e2e import E2EPlan, run_suite


@pytest.mark.integration
class TestSuite:
    def test_tiny_run_reports_every_figure_and_cleans_up(self, clean_tmpdir: Path) -> None:
        """One small configuration on a real stack: every request succeeds, every figure
        and CPU role is reported, and no process or run directory is left behind."""
        plan = E2EPlan(
            repeats=1,
            warmup_s=0.5,
            measure_s=2.0,
            start_together=False,
            workers=(1,),
            detokenizers=1,
            concurrency=4,
            max_new_tokens=16,
        )
        doc = run_suite(plan, tmpdir=clean_tmpdir)
        json.dumps(doc)
        assert doc["errors"] == 0
        config = doc["configs"]["1 worker"]
        assert config["medians"]["requests_per_s"] > 0
        assert config["medians"]["output_tokens_per_s"] > 0
        assert 0 < doc["routing_cpu_share"] < 1
        run = doc["runs"][0]
        assert run["processes"] == {
            "supervisor": 1,
            "admin": 1,
            "router": 1,
            "detok-router": 1,
            "detokenizer": 1,
            "engine": 1,
            "worker": 1,
        }
        assert set(run["cpu_s_by_role"]) <= set(run["processes"])
        assert len(run["cpu_s_per_process"]["worker"]) == 1
        assert run["unmatched_pids"] == []
        assert doc["targets"]["routing_cpu_share"]["verdict"] in {"PASS", "FAIL"}
