"""``docs/reliability.md``'s results tables, rendered from a fault-suite figures file.

The fault tests append one JSON line per report to ``$SWITCHBOARD_FAULT_FIGURES``
(``harness/figures.py``); the committed run is ``docs/figures/fault_figures.jsonl``.
:func:`render` turns those lines into the two tables the doc holds between its
``<!-- generated: fault_figures ... -->`` markers: the faults with request outcomes
(which engine, how many requests ended ok, with a clear error, with a wrong text, hung,
and the test's own figures) and the other faults' figures. A test holds the doc to the
file; ``python -m tests.fault.harness.reliability_table --write`` rewrites the doc after
a new run (``SWITCHBOARD_FAULT_FIGURES=$PWD/docs/figures/fault_figures.jsonl pytest -m fault``,
the file emptied first).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

__all__ = ["DOC", "ENGINE_NAMES", "FIGURES", "MARKERS", "main", "read_lines", "render", "rewrite"]

REPO: Final = Path(__file__).resolve().parents[3]
FIGURES: Final = REPO / "docs" / "figures" / "fault_figures.jsonl"
DOC: Final = REPO / "docs" / "reliability.md"
MARKERS: Final = (
    "<!-- generated: fault_figures begin -->",
    "<!-- generated: fault_figures end -->",
)

#: How the tables name the figures' ``engine`` (``StackConfig.engine``).
ENGINE_NAMES: Final = {"sim": "built-in", "llama-cpp": "llama.cpp"}
_OUTCOMES: Final = ("ok", "clear error", "wrong text", "hung")
#: Values shown in the tables, in this order; the others stay in the file.
_SHOWN: Final = (
    "recovery_s",
    "path_recovery_s",
    "restart_s",
    "slowest_clear_error_s",
    "in_flight_ended_within_s",
    "children_gone_s",
    "orphans",
    "socket_files_left",
    "in_flight_done_within_s",
    "supervisor_exit_s",
    "exit_status",
    "ratio",
    "declared_dead_after_s",
    "serving_again_after_cont_s",
    "peak_rps",
    "soak_rps",
    "soak_s",
    "rss_before_mib",
    "rss_after_mib",
    "rss_growth_pct",
    "engine_rss_before_mib",
    "engine_rss_after_mib",
    "engine_rss_growth_pct",
    "fds_before",
    "fds_after",
    "kv_cells_used_after",
    "kv_cells_total",
    "operations",
    "pause_modes",
    "statuses",
    "overdue",
    "max_over_timeout_s",
    "agree",
    "final_continue",
    "request_after",
    "status",
    "latency_s",
    "timeout_s",
    "over_limit_send_s",
    "messages",
    "frames",
    "sent_vs_counted_mismatches",
    "pids_unchanged",
    "restarts",
    "endpoints",
    "wanted",
)


def read_lines(path: Path = FIGURES) -> list[dict[str, Any]]:
    """The figures lines of ``path``, the last of each (test, engine) kept, in first-seen
    order (a line without ``engine`` is the built-in engine's)."""
    kept: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            kept[entry["test"], entry.get("engine", "sim")] = entry
    return list(kept.values())


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _figures(values: Mapping[str, Any]) -> str:
    shown = [f"{name} {_value(values[name])}" for name in _SHOWN if name in values]
    return "; ".join(shown).replace("|", "/")


def _counts(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The outcome counts of the run's main group (``all``, else ``soak``, else all
    groups together)."""
    for group in ("all", "soak"):
        if group in counts:
            return dict(counts[group])
    total = dict.fromkeys(_OUTCOMES, 0)
    for tally in counts.values():
        for outcome in _OUTCOMES:
            total[outcome] += tally.get(outcome, 0)
    return total


def render(lines: Iterable[Mapping[str, Any]]) -> str:
    """The two tables (see the module docstring), as Markdown."""
    loaded = ["| fault | engine | requests | ok | clear error | wrong text | hung | figures |"]
    loaded.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    other = ["| test | figures |", "| --- | --- |"]
    for entry in lines:
        name = entry["test"]
        engine = ENGINE_NAMES[entry.get("engine", "sim")]
        figures = _figures(entry.get("values", {}))
        if entry.get("counts"):
            tally = _counts(entry["counts"])
            cells = [str(tally.get(outcome, 0)) for outcome in _OUTCOMES]
            loaded.append(
                f"| {name} | {engine} | {sum(map(int, cells))} | {' | '.join(cells)} | {figures} |"
            )
        else:
            other.append(f"| {name} | {figures} |")
    return "\n".join(
        ["#### Faults under load", "", *loaded, "", "#### Bad input and barriers", "", *other]
    )


def rewrite(doc: str, table: str) -> str:
    """``doc`` with the text between the markers replaced by ``table``."""
    begin, end = (re.escape(marker) for marker in MARKERS)
    pattern = re.compile(f"{begin}\n.*?{end}", re.DOTALL)
    if not pattern.search(doc):
        raise ValueError(f"the doc lacks the markers {MARKERS}")
    return pattern.sub(lambda _: f"{MARKERS[0]}\n{table}\n{MARKERS[1]}", doc)


def main(argv: list[str] | None = None) -> None:
    """Print the tables rendered from the committed figures, or ``--write`` them into
    the doc."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.fault.harness.reliability_table",
        description="docs/reliability.md's results tables from docs/figures/fault_figures.jsonl",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the doc's tables")
    args = parser.parse_args(argv)
    rendered = render(read_lines())
    if args.write:
        DOC.write_text(rewrite(DOC.read_text(encoding="utf-8"), rendered), encoding="utf-8")
    else:
        print(rendered)


if __name__ == "__main__":
    main()
