"""The targets and tables of ``switchboard bench workers`` (issue 24, point 9).

:data:`TARGETS` are the acceptance bounds of many workers on one router; each figure of a
run (:func:`switchboard.bench.workers.run_workers`) is compared with its bound by
:func:`missed_targets`. :func:`doc_table` renders ``docs/benchmarks.md``'s table from a
run's JSON document; ``python -m switchboard.bench.workers_stats [FILE]`` prints it for
``docs/figures/bench_workers.json`` (or FILE), and a test checks the page holds exactly
that.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = ["FIGURES_FILE", "TARGETS", "doc_table", "missed_targets", "report_table"]

#: The committed run the docs show.
FIGURES_FILE: Final = (
    Path(__file__).resolve().parents[2] / "docs" / "figures" / "bench_workers.json"
)

#: Figure -> (what it is, its unit, the most it may be).
TARGETS: Final[Mapping[str, tuple[str, str, float]]] = {
    "pause_barrier_s": ("pause barrier (POST /api/pause, every worker acks)", "s", 1.0),
    "list_workers_s": ("GET /api/workers", "s", 0.1),
    "metrics_scrape_s": ("GET /metrics", "s", 1.0),
    "router_idle_cores": ("router idle CPU, heartbeats flowing", "cores", 0.05),
    "router_kib_per_worker": ("router memory per registered worker", "KiB", 10.0),
}

#: Figures reported beside the targets.
REPORTED: Final[Mapping[str, tuple[str, str]]] = {
    "continue_barrier_s": ("continue barrier (POST /api/continue)", "s"),
    "router_idle_cores_zmq_threads": ("of the router's idle CPU, ZeroMQ's own threads", "cores"),
    "router_kib_per_worker_growth_per_s": (
        "router memory per worker: growth while heartbeats flow",
        "KiB/s",
    ),
    "zmq_floor_kib_per_worker": (
        "of the router's memory per worker, ZeroMQ's 3 connections (bare pyzmq)",
        "KiB",
    ),
    "own_kib_per_worker": (
        "of the router's memory per worker, Switchboard's own (the rest)",
        "KiB",
    ),
}


def missed_targets(figures: Mapping[str, float | None]) -> list[str]:
    """Each target ``figures`` misses (or lacks), as ``"name value (target <= bound)"``."""
    missed = []
    for name, (_, _, bound) in TARGETS.items():
        value = figures.get(name)
        if value is None or value > bound:
            shown = "None" if value is None else _number(value)
            missed.append(f"{name} {shown} (target <= {_number(bound)})")
    return missed


def _number(value: float) -> str:
    """Three significant digits, no exponent for the ranges these figures take."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _shown(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "cores":
        return f"{value * 100:.1f} % of a core"
    if unit == "KiB/s":
        return f"{value:.3f} {unit}"
    return f"{value:.1f} {unit}"


def _rows(doc: Mapping[str, Any]) -> list[str]:
    figures = doc["figures"]
    rows = ["| figure | median | target | verdict |", "| --- | --- | --- | --- |"]
    for name, (label, unit, bound) in TARGETS.items():
        value = figures[name]
        verdict = "PASS" if value <= bound else "MISSED"
        rows.append(f"| {label} | {_shown(value, unit)} | <= {_shown(bound, unit)} | {verdict} |")
    for name, (label, unit) in REPORTED.items():
        rows.append(f"| {label} | {_shown(figures[name], unit)} | reported | |")
    return rows


def doc_table(doc: Mapping[str, Any]) -> str:
    """``docs/benchmarks.md``'s table and its one line of context, from a run's JSON."""
    plan, machine, check = doc["plan"], doc["machine"], doc["workers_check"]
    context = (
        f"{plan['count']:,} simulated workers in {plan['processes']} processes; "
        f"{plan['barriers']} pause + continue barriers, {plan['reads']} reads of each "
        f"endpoint, {plan['cpu_windows']} CPU windows of {plan['cpu_window_s']:g} s; "
        f"{check['applied_last_continue']:,} of {check['count']:,} workers applied the "
        f"last continue; {machine['cpus_usable']} CPUs, Python {machine['python']}, "
        f"libzmq {machine['libzmq']}."
    )
    return "\n".join([context, "", *_rows(doc)])


def report_table(doc: Mapping[str, Any]) -> str:
    """The console report of a run: the table, then what was missed, if anything."""
    lines = [f"switchboard bench workers: {doc['plan']['count']:,} workers", "", *_rows(doc)]
    missed = missed_targets(doc["figures"])
    if missed:
        lines += ["", *(f"MISSED: {item}" for item in missed)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print :func:`doc_table` of ``argv[0]`` (default :data:`FIGURES_FILE`)."""
    path = Path(argv[0]) if argv else FIGURES_FILE
    print(doc_table(json.loads(path.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
