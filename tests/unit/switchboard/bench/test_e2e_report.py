"""Tests for the report of ``switchboard bench e2e`` (switchboard.bench.e2e_report): the
headline share, the verdicts and the rendered table, from made-up runs."""

from __future__ import annotations

import json

import pytest

from switchboard.bench.e2e_report import E2ERun, render, summarize
from switchboard.bench.e2e_stats import LoadSummary


def _run(config: str, workers: int, share: float, repetition: int = 0) -> E2ERun:
    load = LoadSummary(10.0, 500, 50.0, 6400.0, 0.1, 0.3, 1.2, 1.6, 0, 0)
    router = 10.0 * share
    return E2ERun(
        config=config,
        workers=workers,
        repetition=repetition,
        load=load,
        cpu_s_by_role={"router": router / 2, "detok-router": router / 2, "worker": 10 - router},
        loadgen_cpu_s=2.0,
        cpu_s_per_process={"detokenizer": [5.0, 0.0], "worker": [4.0, 3.0]},
    )


PLAN = {
    "concurrency": 64,
    "max_new_tokens": 128,
    "step_time_s": 0.005,
    "detokenizers": 2,
    "repeats": 3,
    "measure_s": 20.0,
    "warmup_s": 5.0,
    "client_label": "raw",
}
MACHINE = {"cpu_count": 2, "load_average_at_start": [0.5, 0.5, 0.5], "python": "3.11"}


class TestReport:
    def test_headline_is_the_worst_configuration_median(self) -> None:
        """routing_cpu_share is the largest per-configuration median, judged against 10%."""
        runs = [
            _run("1 worker", 1, share)
            for share in (0.04, 0.05, 0.30)  # one outlier: the median ignores it
        ] + [_run("2 workers", 2, share) for share in (0.06, 0.07, 0.08)]
        doc = summarize(runs, plan=PLAN, machine=MACHINE, elapsed_s=1.0)
        json.dumps(doc)
        assert doc["routing_cpu_share_by_config"] == pytest.approx(
            {"1 worker": 0.05, "2 workers": 0.07}
        )
        assert doc["routing_cpu_share"] == pytest.approx(0.07)
        assert doc["targets"]["routing_cpu_share"]["verdict"] == "PASS"
        assert doc["configs"]["1 worker"]["medians"]["loadgen_cores"] == pytest.approx(0.2)
        assert doc["configs"]["1 worker"]["medians"]["stack_cores"] == pytest.approx(1.0)
        assert doc["configs"]["2 workers"]["process_cores_medians"] == {
            "detokenizer": pytest.approx([0.5, 0.0]),
            "worker": pytest.approx([0.4, 0.3]),
        }
        text = render(doc)
        assert "1 worker" in text
        assert "2 workers" in text
        assert "PASS" in text
        assert "detokenizers 0.50 / 0.00" in text

    def test_share_above_target_and_errors_fail(self) -> None:
        """A share above 10% and any failed request are both reported as FAIL."""
        failed = LoadSummary(10.0, 1, 0.1, 1.0, None, None, None, None, 1, 4, ("HTTP 503",))
        run = _run("1 worker", 1, 0.2)
        runs = [E2ERun(**{**run.__dict__, "load": failed})]
        doc = summarize(runs, plan=PLAN, machine=MACHINE, elapsed_s=1.0)
        assert doc["targets"]["routing_cpu_share"]["verdict"] == "FAIL"
        assert doc["errors"] == 4
        assert doc["targets"]["errors"]["verdict"] == "FAIL"
        assert "HTTP 503" in render(doc)
