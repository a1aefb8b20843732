"""Medians, ratios, targets and the printed table of the router benchmark.

Pure functions of the trial results, so they are tested without processes. Every
ratio is a ratio of medians of runs interleaved in the same invocation; absolute numbers
are context only (these machines are noisy, see ``BASELINES.md``).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
import zmq

from router_core.wire import DATA_KINDS
from switchboard.bench.backward import IMPLS, SplitRun
from switchboard.bench.forward import PATHS, HopRun

__all__ = [
    "TARGETS",
    "Target",
    "machine_facts",
    "publish",
    "render",
    "summarize",
]

_PATH_LABELS: Final = {
    "direct": "direct, no hop (limit)",
    "proxy": "zmq.proxy in C",
    "switchboard": "switchboard router",
}
_IMPL_LABELS: Final = {
    "naive": "naive (pickle + field copy)",
    "switchboard": "switchboard (frames)",
}


@dataclass(frozen=True)
class Target:
    """A ratio the suite reports against, with the threshold it should reach."""

    key: str
    label: str
    minimum: float


#: The reported (not enforced) targets, by JSON key.
TARGETS: Final = (
    Target("forward_1k_vs_proxy", "forward 1 KiB, switchboard / zmq.proxy", 0.8),
    Target("split_b64_vs_naive", "split B=64, switchboard / naive", 5.0),
)


def size_label(size: int) -> str:
    """``64 B``, ``1 KiB``, ``16 KiB``."""
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def split_label(batch_size: int, logprobs: bool) -> str:
    """The column key of a split configuration: ``"64"`` or ``"64+logprobs"``."""
    return f"{batch_size}+logprobs" if logprobs else str(batch_size)


def _median(rates: Sequence[float]) -> float | None:
    return statistics.median(rates) if rates else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _table_of(runs: Iterable[tuple[str, str, float, bool]]) -> dict[str, dict[str, Any]]:
    """``{row: {column: {"median", "min", "max", "runs", "incomplete"}}}`` of complete runs."""
    grouped: dict[str, dict[str, tuple[list[float], int]]] = {}
    for row, column, rate, complete in runs:
        rates, incomplete = grouped.setdefault(row, {}).get(column, ([], 0))
        if complete:
            rates.append(rate)
        grouped[row][column] = (rates, incomplete + (not complete))
    return {
        row: {
            column: {
                "median": _median(rates),
                "min": min(rates, default=None),
                "max": max(rates, default=None),
                "runs": len(rates),
                "incomplete": incomplete,
            }
            for column, (rates, incomplete) in columns.items()
        }
        for row, columns in grouped.items()
    }


def summarize(
    hop_runs: Sequence[HopRun],
    split_runs: Sequence[SplitRun],
    *,
    machine: dict[str, Any],
    plan: dict[str, Any],
    elapsed_s: float,
) -> dict[str, Any]:
    """The whole JSON document: headline ratios, medians, ratios, raw runs, machine."""
    forward = _table_of((r.path, str(r.size), r.rate, r.complete) for r in hop_runs)
    split = _table_of(
        (r.impl, split_label(r.batch_size, r.logprobs), r.rate, r.complete) for r in split_runs
    )
    fwd_medians = {row: {c: v["median"] for c, v in cols.items()} for row, cols in forward.items()}
    split_medians = {row: {c: v["median"] for c, v in cols.items()} for row, cols in split.items()}
    fwd_ratios = {
        f"{a}/{b}": {
            column: _ratio(fwd_medians.get(a, {}).get(column), fwd_medians.get(b, {}).get(column))
            for column in fwd_medians.get(a, {})
        }
        for a, b in (("switchboard", "proxy"), ("switchboard", "direct"), ("proxy", "direct"))
    }
    split_ratios = {
        "switchboard/naive": {
            column: _ratio(value, split_medians.get("naive", {}).get(column))
            for column, value in split_medians.get("switchboard", {}).items()
        }
    }
    headline = {
        "forward_1k_vs_proxy": fwd_ratios["switchboard/proxy"].get("1024"),
        "split_b64_vs_naive": split_ratios["switchboard/naive"].get("64"),
    }
    return {
        "suite": "router",
        **headline,
        "targets": {
            t.key: {
                "label": t.label,
                "minimum": t.minimum,
                "value": headline[t.key],
                "verdict": _verdict(headline[t.key], t.minimum),
            }
            for t in TARGETS
        },
        "forward": {
            "unit": "messages/s",
            "medians": fwd_medians,
            "ratios": fwd_ratios,
            "stats": forward,
            "runs": [{**asdict(r), "rate": r.rate, "complete": r.complete} for r in hop_runs],
        },
        "split": {
            "unit": "requests/s",
            "workers": 4,
            "medians": split_medians,
            "ratios": split_ratios,
            "stats": split,
            "runs": [{**asdict(r), "rate": r.rate, "complete": r.complete} for r in split_runs],
        },
        "machine": machine,
        "plan": plan,
        "elapsed_s": round(elapsed_s, 1),
    }


def _verdict(value: float | None, minimum: float) -> str:
    if value is None:
        return "NO DATA"
    return "PASS" if value >= minimum else "BELOW"


def router_forward_path() -> str:
    """Which forward loop the router will run: ``"c-fastpath"`` if its optional C
    extension loads here (it is inherited by the forked router), else ``"python"``."""
    try:
        fastpath = importlib.import_module("router_core.fastpath")
        return "python" if fastpath.load(DATA_KINDS) is None else "c-fastpath"
    except (ImportError, AttributeError, TypeError):
        return "python"


def machine_facts() -> dict[str, Any]:
    """What the numbers depend on: CPUs, load, library versions, the router's loop."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "load_average_at_start": list(os.getloadavg()),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "msgspec": msgspec.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "transport": "ipc://",
        "router_forward_path": router_forward_path(),
    }


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header))]
    out = []
    for line in (header, *rows):
        cells = [
            line[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)),
        ]
        out.append("  ".join(cells).rstrip())
    return out


def render(doc: dict[str, Any]) -> str:
    """The human-readable report of a :func:`summarize` document."""
    repeats = doc["plan"].get("repeats", "?")
    lines: list[str] = []
    fwd = doc["forward"]
    columns = sorted({c for row in fwd["medians"].values() for c in row}, key=int)
    lines.append(
        f"Forward hop, worker -> engine (messages/s, median of {repeats} interleaved runs)"
    )
    rows = [
        [_PATH_LABELS[p], *(_rate(fwd["medians"].get(p, {}).get(c)) for c in columns)]
        for p in PATHS
        if p in fwd["medians"]
    ]
    for name, label in (
        ("switchboard/proxy", "switchboard / proxy"),
        ("switchboard/direct", "switchboard / direct"),
        ("proxy/direct", "proxy / direct"),
    ):
        rows.append([label, *(_times(fwd["ratios"][name].get(c)) for c in columns)])
    lines += _rows(["path", *(size_label(int(c)) for c in columns)], rows)

    split = doc["split"]
    keys = sorted(
        {c for row in split["medians"].values() for c in row},
        key=lambda c: (c.endswith("logprobs"), int(c.split("+")[0])),
    )
    lines += [
        "",
        f"Backward split + fan-out to {split['workers']} workers "
        f"(requests/s, median of {repeats} interleaved runs)",
    ]
    rows = [
        [_IMPL_LABELS[i], *(_rate(split["medians"].get(i, {}).get(k)) for k in keys)]
        for i in IMPLS
        if i in split["medians"]
    ]
    rows.append(
        [
            "switchboard / naive",
            *(_times(split["ratios"]["switchboard/naive"].get(k)) for k in keys),
        ]
    )
    lines += _rows(["path", *(f"B={k}" for k in keys)], rows)

    lines += ["", "Targets (reported, not enforced)"]
    lines += _rows(
        ["target", "ratio", "minimum", "verdict"],
        [
            [t["label"], _times(t["value"]), _times(t["minimum"]), t["verdict"]]
            for t in doc["targets"].values()
        ],
    )
    lines += ["", *_noise_lines(doc)]
    return "\n".join(lines)


def _noise_lines(doc: dict[str, Any]) -> list[str]:
    """The widest run-to-run spread and any incomplete runs, so noise is visible."""
    widest: tuple[float, str] | None = None
    incomplete = []
    for section in ("forward", "split"):
        for row, columns in doc[section]["stats"].items():
            for column, stats in columns.items():
                if stats["incomplete"]:
                    incomplete.append(f"{section} {row} {column}: {stats['incomplete']}")
                if stats["min"]:
                    spread = stats["max"] / stats["min"]
                    if widest is None or spread > widest[0]:
                        widest = (spread, f"{section} {row} {column}")
    machine = doc["machine"]
    lines = [
        f"machine: {machine['cpu_count']} CPUs, load {machine['load_average_at_start'][0]:.2f}"
        f" at start, pyzmq {machine['pyzmq']}, libzmq {machine['libzmq']},"
        f" router forward loop: {machine.get('router_forward_path', '?')},"
        f" elapsed {doc['elapsed_s']} s"
    ]
    if widest is not None:
        lines.append(f"widest run-to-run spread (max/min): {widest[0]:.2f}x ({widest[1]})")
    if incomplete:
        lines.append(
            "INCOMPLETE runs (lost messages; left out of medians): " + "; ".join(incomplete)
        )
    losses: dict[str, int] = {}
    for section in ("forward", "split"):
        for run in doc[section]["runs"]:
            for reason, count in run.get("router_losses", {}).items():
                losses[reason] = losses.get(reason, 0) + count
    if losses:
        lines.append(
            "router's own loss counters, summed over its runs: "
            + ", ".join(f"{reason}={count}" for reason, count in sorted(losses.items()))
        )
    return lines


def publish(table: str, doc: dict[str, Any], json_path: str | None) -> None:
    """Print a benchmark's table and, given a path, write its JSON document there."""
    print(table)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"\nwrote {json_path}")
