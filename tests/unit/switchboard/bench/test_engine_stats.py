"""The arithmetic of switchboard bench engine (switchboard.bench.engine_stats and the pure
helpers of switchboard.bench.engine): figures per level, ratios, targets, the report and
docs/benchmarks.md's table, which must match the committed figures file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from switchboard.bench.engine import comparable, same_text
from switchboard.bench.engine_stats import (
    Level,
    Stream,
    doc_table,
    level_figures,
    levels_from_json,
    missed_targets,
    ratios,
    report_table,
)

REPO = Path(__file__).resolve().parents[4]
FIGURES = REPO / "docs" / "figures" / "bench_engine.json"
BENCHMARKS = REPO / "docs" / "benchmarks.md"


def stream(sent: float, first: float, last: float, tokens: int, error: str | None = None) -> Stream:
    return Stream(sent, first, last, tokens, "x" * tokens, error)


def level(concurrency: int, tokens_per_s: float, ttft_p99_s: float = 0.1) -> Level:
    return Level(concurrency, 10, 0, 100, 1.0, tokens_per_s, 0.05, ttft_p99_s, 0.01, 0.02, 0.1)


class TestLevelFigures:
    def test_throughput_ttft_itl_and_cpu(self) -> None:
        streams = [stream(0.0, 0.1, 1.1, 11), stream(0.0, 0.3, 0.8, 6)]
        figures = level_figures(2, streams, wall_s=2.0, cpu_s=3.0)
        assert figures.output_tokens == 17 and figures.tokens_per_s == 8.5
        assert figures.ttft_p50_s == pytest.approx(0.2)
        assert figures.itl_p50_s == pytest.approx(0.1)  # 1.0/10 and 0.5/5
        assert figures.cpu_s_per_request == 1.5 and figures.errors == 0

    def test_failed_streams_count_as_errors_not_tokens(self) -> None:
        streams = [stream(0.0, 0.1, 0.2, 3), stream(0.0, 0.1, 0.2, 5, error="status 500")]
        figures = level_figures(1, streams, wall_s=1.0, cpu_s=None)
        assert (figures.errors, figures.output_tokens) == (1, 3)
        assert figures.cpu_s_per_request is None

    def test_one_token_streams_have_no_itl(self) -> None:
        figures = level_figures(1, [stream(0.0, 0.1, 0.1, 1)], wall_s=1.0, cpu_s=1.0)
        assert figures.itl_p50_s is None and figures.ttft_p99_s == pytest.approx(0.1)


class TestRatiosAndTargets:
    def test_the_four_keys(self) -> None:
        levels = {
            "switchboard": {1: level(1, 100), 8: level(8, 400), 32: level(32, 600, 0.5)},
            "server": {1: level(1, 100), 8: level(8, 100), 32: level(32, 120, 20.0)},
        }
        assert ratios(levels) == {
            "llama_vs_server_c1": 1.0,
            "llama_vs_server_c8": 4.0,
            "llama_vs_server_c32": 5.0,
            "ttft_p99_vs_server_c32": 0.025,
        }

    def test_a_missing_level_or_zero_is_none(self) -> None:
        levels = {"switchboard": {1: level(1, 100)}, "server": {1: level(1, 0)}}
        assert set(ratios(levels).values()) == {None}

    def test_targets(self) -> None:
        met = {
            "llama_vs_server_c1": 0.9,
            "llama_vs_server_c8": 0.1,  # no target
            "llama_vs_server_c32": 4.0,
            "ttft_p99_vs_server_c32": 0.25,
        }
        assert missed_targets(met) == []
        missed = missed_targets({**met, "llama_vs_server_c32": 3.9, "ttft_p99_vs_server_c32": None})
        assert missed == [
            "llama_vs_server_c32 3.9 (target >= 4.0)",
            "ttft_p99_vs_server_c32 None (target <= 0.25)",
        ]

    def test_the_report_says_what_was_missed(self) -> None:
        levels = {"switchboard": {1: level(1, 50)}, "server": {1: level(1, 100)}}
        report = report_table(levels, ratios(levels))
        assert "| 1 | Switchboard | 50 |" in report and "| 1 | llama_cpp.server | 100 |" in report
        assert "MISSED: llama_vs_server_c1 0.5 (target >= 0.9)" in report


class TestTexts:
    def test_replacement_characters_are_not_compared(self) -> None:
        assert comparable("a\ufffdb\ufffd") == "ab"

    def test_same_text_counts_prompts_with_one_equal_text(self) -> None:
        ours = {1: {"p": {"a"}, "q": {"b"}}, 8: {"p": {"a", "c"}}}
        theirs = {1: {"p": {"a"}, "q": {"z"}}, 8: {"p": {"a", "c"}}}
        assert same_text(ours, theirs) == [1, 3]


class TestTheCommittedFigures:
    def test_they_hold_every_level_and_key(self) -> None:
        results = json.loads(FIGURES.read_text(encoding="utf-8"))
        levels = levels_from_json(results)
        assert all(sorted(by) == [1, 8, 32] for by in levels.values())
        assert set(results["figures"]) == {
            "llama_vs_server_c1",
            "llama_vs_server_c8",
            "llama_vs_server_c32",
            "ttft_p99_vs_server_c32",
        }
        assert results["config"]["size"] == "bench"
        assert "--interrupt_requests False" in results["config"]["server"]

    def test_the_doc_table_is_rendered_from_them(self) -> None:
        """docs/benchmarks.md holds exactly doc_table() of the committed JSON."""
        text = BENCHMARKS.read_text(encoding="utf-8")
        found = re.search(
            r"<!-- generated: bench_engine begin -->\n(.*?)\n<!-- generated: bench_engine end -->",
            text,
            re.DOTALL,
        )
        assert found, "docs/benchmarks.md lacks the bench_engine markers"
        expected = doc_table(json.loads(FIGURES.read_text(encoding="utf-8")))
        assert found.group(1) == expected, (
            "docs/benchmarks.md's engine table is stale: paste doc_table() of "
            "docs/figures/bench_engine.json (python -m switchboard.bench.engine_stats)"
        )
