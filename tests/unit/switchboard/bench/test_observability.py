"""Tests for the observability benchmark's report: paired ratios, medians, the verdict,
and the stack each mode runs (no stack is started here; the suite itself runs in
tests/integration/test_bench_observability.py)."""

from __future__ import annotations

from typing import Any

from switchboard.bench.e2e import QUICK
from switchboard.bench.observability import MODES, OFF, SAMPLED, TRACED, stack_config, summarize


def run(mode: str, repetition: int, rate: float) -> dict[str, Any]:
    """A run's JSON as the suite records it, reduced to what the summary reads."""
    figures = {"requests_per_s": rate, "ttft_p50_s": 0.1, "e2e_p50_s": 1.0, "stack_cores": 1.5}
    return {
        "mode": mode,
        "repetition": repetition,
        "figures": figures,
        "load": {"errors_total": 0},
    }


class TestSummary:
    def test_ratios_are_paired_within_a_repetition(self) -> None:
        """Each ratio divides by the off run of its own repetition; the headline is the
        median ratio, not the ratio of medians."""
        runs = [
            run(OFF, 0, 100.0),
            run(SAMPLED, 0, 97.0),
            run(TRACED, 0, 80.0),
            run(OFF, 1, 50.0),
            run(SAMPLED, 1, 49.0),
            run(TRACED, 1, 45.0),
            run(OFF, 2, 60.0),
            run(SAMPLED, 2, 54.0),
            run(TRACED, 2, 30.0),
        ]
        doc = summarize(runs)
        assert doc["ratios"][SAMPLED] == [0.97, 0.98, 0.9]
        assert doc["observability_overhead"] == 0.97
        assert doc["observability_overhead_full_tracing"] == 0.8
        assert doc["verdict"] == "PASS" and doc["errors"] == 0
        assert doc["modes"][OFF]["requests_per_s"] == 60.0

    def test_below_target_fails(self) -> None:
        """A ratio under 0.95 is reported as FAIL."""
        doc = summarize([run(OFF, 0, 100.0), run(SAMPLED, 0, 90.0), run(TRACED, 0, 70.0)])
        assert doc["verdict"] == "FAIL"

    def test_missing_off_run_gives_no_ratio(self) -> None:
        """Without an off run in a repetition there is nothing to divide by: no headline."""
        doc = summarize([run(SAMPLED, 0, 90.0)])
        assert doc["observability_overhead"] is None and doc["verdict"] == "n/a"


class TestModes:
    def test_off_has_no_metrics_and_no_endpoint(self) -> None:
        """The off mode runs --no-metrics and gets no OTLP endpoint or sampler."""
        config = stack_config(MODES[0], QUICK, "http://127.0.0.1:1")
        assert not config.metrics and config.otlp_endpoint == "" and config.env == ()

    def test_sampled_mode_sets_the_standard_sampler(self) -> None:
        """1% sampling is the SDK's parentbased_traceidratio with argument 0.01."""
        config = stack_config(MODES[1], QUICK, "http://127.0.0.1:1")
        assert config.metrics and config.otlp_endpoint == "http://127.0.0.1:1"
        assert dict(config.env) == {
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.01",
        }
