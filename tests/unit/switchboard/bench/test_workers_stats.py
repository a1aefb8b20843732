"""The arithmetic of switchboard bench workers (switchboard.bench.workers_stats and the
ids of switchboard.bench.workers_sim): targets, tables, and docs/benchmarks.md's table,
which must match the committed run file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from switchboard.bench.workers import FULL, WorkersPlan
from switchboard.bench.workers_sim import worker_ids
from switchboard.bench.workers_stats import (
    FIGURES_FILE,
    TARGETS,
    doc_table,
    missed_targets,
    report_table,
)

REPO = Path(__file__).resolve().parents[4]
BENCHMARKS = REPO / "docs" / "benchmarks.md"

MET = {
    "pause_barrier_s": 0.2,
    "list_workers_s": 0.02,
    "metrics_scrape_s": 0.1,
    "router_idle_cores": 0.05,
    "router_kib_per_worker": 10.0,
}


def run_doc(**figures: float) -> dict[str, Any]:
    plan = {"count": 1000, "processes": 4, "barriers": 5, "reads": 7}
    return {
        "plan": {**plan, "cpu_windows": 3, "cpu_window_s": 5.0},
        "machine": {"cpus_usable": 2, "python": "3.11.7", "libzmq": "4.3.5"},
        "workers_check": {"applied_last_continue": 1000, "count": 1000},
        "figures": {
            **MET,
            "continue_barrier_s": 0.2,
            "zmq_floor_kib_per_worker": 8.0,
            "own_kib_per_worker": 2.0,
            "router_idle_cores_zmq_threads": 0.01,
            "router_kib_per_worker_growth_per_s": 0.12,
            **figures,
        },
    }


class TestTargets:
    def test_bounds_are_met_inclusively(self) -> None:
        assert missed_targets(MET) == []

    def test_each_miss_and_a_missing_figure_is_named(self) -> None:
        figures = {**MET, "router_idle_cores": 0.058, "router_kib_per_worker": 83.5}
        del figures["list_workers_s"]
        assert missed_targets(figures) == [
            "list_workers_s None (target <= 0.100)",
            "router_idle_cores 0.058 (target <= 0.050)",
            "router_kib_per_worker 83.5 (target <= 10.0)",
        ]

    def test_the_issues_five_bounds(self) -> None:
        assert {name: bound for name, (_, _, bound) in TARGETS.items()} == {
            "pause_barrier_s": 1.0,
            "list_workers_s": 0.1,
            "metrics_scrape_s": 1.0,
            "router_idle_cores": 0.05,
            "router_kib_per_worker": 10.0,
        }


class TestTables:
    def test_report_says_what_was_missed(self) -> None:
        report = report_table(run_doc(router_kib_per_worker=83.5))
        assert "| router memory per registered worker | 83.5 KiB | <= 10.0 KiB | MISSED |" in report
        assert "| GET /api/workers | 20 ms | <= 100 ms | PASS |" in report
        assert report.endswith("MISSED: router_kib_per_worker 83.5 (target <= 10.0)")

    def test_doc_table_names_the_run(self) -> None:
        table = doc_table(run_doc(router_idle_cores=0.058))
        assert table.startswith("1,000 simulated workers in 4 processes;")
        assert "| router idle CPU, heartbeats flowing | 5.8 % of a core | <= 5.0 % " in table
        assert "1,000 of 1,000 workers applied the last continue" in table


class TestWorkerIds:
    def test_dealt_round_robin_and_zero_padded(self) -> None:
        assert worker_ids(5, 2) == [
            ["sim-00000", "sim-00002", "sim-00004"],
            ["sim-00001", "sim-00003"],
        ]

    def test_no_cap_on_the_count(self) -> None:
        ids = worker_ids(123_456, 3)
        assert sum(map(len, ids)) == 123_456
        assert ids[0][1] == "sim-000003" and ids[-1][-1] == "sim-123455"

    def test_more_processes_than_workers(self) -> None:
        assert worker_ids(2, 5) == [["sim-00000"], ["sim-00001"]]

    def test_bad_counts(self) -> None:
        with pytest.raises(ValueError):
            worker_ids(0, 1)

    def test_processes_follow_the_count(self) -> None:
        assert FULL.process_count() == 4
        assert WorkersPlan(count=4096).process_count() == 17
        assert WorkersPlan(count=10, processes=3).process_count() == 3


class TestTheCommittedRun:
    def test_it_is_a_full_run_at_a_thousand(self) -> None:
        doc = json.loads(FIGURES_FILE.read_text(encoding="utf-8"))
        assert doc["suite"] == "workers" and doc["plan"]["count"] == 1000
        assert doc["plan"]["barriers"] == FULL.barriers and doc["plan"]["reads"] == FULL.reads
        assert doc["workers_check"]["applied_last_continue"] == 1000
        assert len(doc["samples"]["pause_wall_s"]) == FULL.barriers
        assert set(TARGETS) <= set(doc["figures"])

    def test_the_doc_table_is_rendered_from_it(self) -> None:
        """docs/benchmarks.md holds exactly doc_table() of the committed JSON."""
        text = BENCHMARKS.read_text(encoding="utf-8")
        found = re.search(
            r"<!-- generated: bench_workers begin -->\n(.*?)\n"
            r"<!-- generated: bench_workers end -->",
            text,
            re.DOTALL,
        )
        assert found, "docs/benchmarks.md lacks the bench_workers markers"
        expected = doc_table(json.loads(FIGURES_FILE.read_text(encoding="utf-8")))
        assert found.group(1) == expected, (
            "docs/benchmarks.md's workers table is stale: paste the output of "
            "python -m switchboard.bench.workers_stats"
        )
