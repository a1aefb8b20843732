"""The end-to-end benchmark's runs, its JSON document and its printed table.

Pure functions of the measured runs, so they are tested without a stack. Each quoted
figure is the median over the repetitions of one configuration; the headline
``routing_cpu_share`` is the largest of the per-configuration medians, so the target is
judged against the worst configuration.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from switchboard.bench.e2e_stats import ROLES, ROUTING_ROLES, LoadSummary, routing_share

__all__ = [
    "METRICS",
    "ROUTING_SHARE_MAXIMUM",
    "E2ERun",
    "render",
    "summarize",
]

#: The target: routing processes use at most this share of the stack's CPU under load.
ROUTING_SHARE_MAXIMUM: Final = 0.10

#: Per-run figures quoted as medians over the repetitions of a configuration.
METRICS: Final = (
    "requests_per_s",
    "output_tokens_per_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "stack_cores",
    "routing_cpu_share",
    "loadgen_cores",
    "loadgen_cpu_ms_per_request",
)


@dataclass(frozen=True)
class E2ERun:
    """One configuration measured once: the load's summary and the CPU it cost."""

    config: str
    workers: int
    repetition: int
    load: LoadSummary
    #: CPU seconds of each role of the stack inside the window.
    cpu_s_by_role: dict[str, float]
    #: The load generator's CPU seconds inside the window.
    loadgen_cpu_s: float
    #: Stack processes that were not there at both edges of the window (died, restarted).
    unmatched_pids: list[int] = field(default_factory=list)
    #: CPU seconds of each process inside the window, per role, largest first.
    cpu_s_per_process: dict[str, list[float]] = field(default_factory=dict)
    #: Processes per role, as found under the supervisor.
    processes: dict[str, int] = field(default_factory=dict)
    #: CPU cores used by other, idle stacks inside the window (quick mode starts the
    #: stacks of a repetition together).
    neighbour_cores: float = 0.0
    start_s: float = 0.0
    stop_s: float = 0.0

    @property
    def stack_cpu_s(self) -> float:
        """CPU seconds of every stack process together."""
        return sum(self.cpu_s_by_role.values())

    @property
    def routing_cpu_share(self) -> float | None:
        """Router + detokenizer router CPU over the whole stack's CPU."""
        return routing_share(self.cpu_s_by_role)

    def figures(self) -> dict[str, float | None]:
        """Every figure of :data:`METRICS` for this run."""
        window = self.load.window_s
        requests = self.load.requests
        return {
            "requests_per_s": self.load.requests_per_s,
            "output_tokens_per_s": self.load.output_tokens_per_s,
            "ttft_p50_s": self.load.ttft_p50_s,
            "ttft_p99_s": self.load.ttft_p99_s,
            "e2e_p50_s": self.load.e2e_p50_s,
            "e2e_p99_s": self.load.e2e_p99_s,
            "stack_cores": self.stack_cpu_s / window,
            "routing_cpu_share": self.routing_cpu_share,
            "loadgen_cores": self.loadgen_cpu_s / window,
            "loadgen_cpu_ms_per_request": (
                1000 * self.loadgen_cpu_s / requests if requests else None
            ),
        }

    def role_shares(self) -> dict[str, float]:
        """Each role's share of the stack's CPU."""
        total = self.stack_cpu_s
        return {role: s / total for role, s in self.cpu_s_by_role.items()} if total else {}

    def to_json(self) -> dict[str, Any]:
        """The run as plain data, with its derived figures."""
        return {
            **asdict(self),
            "stack_cpu_s": self.stack_cpu_s,
            "figures": self.figures(),
            "role_shares": self.role_shares(),
        }


def _stats(values: Sequence[float | None]) -> dict[str, Any]:
    present = [v for v in values if v is not None]
    return {
        "median": statistics.median(present) if present else None,
        "min": min(present, default=None),
        "max": max(present, default=None),
        "runs": len(present),
    }


#: Roles whose processes share work, so a lopsided split is worth showing.
_SPREAD_ROLES: Final = ("detokenizer", "worker")


def _process_cores(runs: Sequence[E2ERun]) -> dict[str, list[float]]:
    """Per role, the median over runs of each process's cores, busiest process first."""
    spread: dict[str, list[float]] = {}
    for role in _SPREAD_ROLES:
        columns = [
            [seconds / run.load.window_s for seconds in run.cpu_s_per_process.get(role, [])]
            for run in runs
        ]
        width = max((len(column) for column in columns), default=0)
        if width:
            spread[role] = [
                statistics.median(column[i] for column in columns if len(column) > i)
                for i in range(width)
            ]
    return spread


def _config_summary(runs: Sequence[E2ERun]) -> dict[str, Any]:
    stats = {metric: _stats([run.figures()[metric] for run in runs]) for metric in METRICS}
    roles = sorted({role for run in runs for role in run.cpu_s_by_role})
    role_shares = {
        role: _stats([run.role_shares().get(role, 0.0) for run in runs]) for role in roles
    }
    return {
        "workers": runs[0].workers,
        "runs": len(runs),
        "medians": {metric: s["median"] for metric, s in stats.items()},
        "stats": stats,
        "role_share_medians": {role: s["median"] for role, s in role_shares.items()},
        "process_cores_medians": _process_cores(runs),
        "errors": sum(run.load.errors_total for run in runs),
        "error_samples": sorted({e for run in runs for e in run.load.error_samples})[:3],
        "unstable_runs": sum(bool(run.unmatched_pids) for run in runs),
    }


def summarize(
    runs: Sequence[E2ERun],
    *,
    plan: Mapping[str, Any],
    machine: Mapping[str, Any],
    elapsed_s: float,
) -> dict[str, Any]:
    """The whole JSON document: headline share, verdicts, per-configuration medians, runs."""
    by_config: dict[str, list[E2ERun]] = {}
    for run in runs:
        by_config.setdefault(run.config, []).append(run)
    configs = {label: _config_summary(group) for label, group in by_config.items()}
    shares = {label: c["medians"]["routing_cpu_share"] for label, c in configs.items()}
    known = [share for share in shares.values() if share is not None]
    headline = max(known) if known else None
    errors = sum(c["errors"] for c in configs.values())
    return {
        "suite": "e2e",
        "routing_cpu_share": headline,
        "routing_cpu_share_by_config": shares,
        "errors": errors,
        "targets": {
            "routing_cpu_share": {
                "label": "routing CPU share, (router + detok-router) / stack",
                "maximum": ROUTING_SHARE_MAXIMUM,
                "value": headline,
                "verdict": _verdict(headline, ROUTING_SHARE_MAXIMUM),
            },
            "errors": {
                "label": "failed requests",
                "maximum": 0,
                "value": errors,
                "verdict": _verdict(errors, 0),
            },
        },
        "configs": configs,
        "runs": [run.to_json() for run in runs],
        "plan": dict(plan),
        "machine": dict(machine),
        "elapsed_s": round(elapsed_s, 1),
    }


def _verdict(value: float | None, maximum: float) -> str:
    if value is None:
        return "NO DATA"
    return "PASS" if value <= maximum else "FAIL"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.0f} ms"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(
            [
                line[0].ljust(widths[0]),
                *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)),
            ]
        ).rstrip()
        for line in (header, *rows)
    ]


def render(doc: Mapping[str, Any]) -> str:
    """The human-readable report of a :func:`summarize` document."""
    plan = doc["plan"]
    configs = doc["configs"]
    lines = [
        f"End to end: {plan['concurrency']} streaming clients, {plan['max_new_tokens']} new "
        f"tokens per request, engine step {plan['step_time_s'] * 1000:g} ms, "
        f"{plan['detokenizers']} detokenizers",
        f"(median of {plan['repeats']} interleaved run(s) per configuration; "
        f"{plan['measure_s']:g} s measured after {plan['warmup_s']:g} s of warm-up; "
        f"load generator: {plan['client_label']})",
        "",
    ]
    rows = []
    for label, c in configs.items():
        m = c["medians"]
        rows.append(
            [
                label,
                _num(m["requests_per_s"], 1),
                _num(m["output_tokens_per_s"]),
                _ms(m["ttft_p50_s"]),
                _ms(m["ttft_p99_s"]),
                _ms(m["e2e_p50_s"]),
                _ms(m["e2e_p99_s"]),
                str(c["errors"]),
            ]
        )
    header = ["config", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "e2e p50", "e2e p99"]
    lines += _rows([*header, "errors"], rows)

    roles = [
        role for role in ROLES if any(role in c["role_share_medians"] for c in configs.values())
    ]
    lines += [
        "",
        "CPU in the measured window: cores = CPU seconds / window seconds;"
        " percentages are shares of the stack's CPU",
    ]
    rows = []
    for label, c in configs.items():
        m = c["medians"]
        rows.append(
            [
                label,
                _num(m["stack_cores"], 2),
                _pct(m["routing_cpu_share"]),
                *(_pct(c["role_share_medians"].get(role)) for role in roles),
                _num(m["loadgen_cores"], 2),
            ]
        )
    role_headers = [f"{role}{'*' if role in ROUTING_ROLES else ''}" for role in roles]
    lines += _rows(["config", "stack cores", "routing*", *role_headers, "load gen cores"], rows)
    lines.append("* routing processes")

    lines += ["", "Targets"]
    target_rows = []
    for key, t in doc["targets"].items():
        show = _pct if key == "routing_cpu_share" else _num
        target_rows.append([t["label"], show(t["value"]), show(t["maximum"]), t["verdict"]])
    lines += _rows(["target", "measured", "maximum", "verdict"], target_rows)
    lines += ["", *_notes(doc)]
    return "\n".join(lines)


def _notes(doc: Mapping[str, Any]) -> list[str]:
    machine = doc["machine"]
    notes = [
        f"machine: {machine.get('cpu_count')} CPUs, load {machine['load_average_at_start'][0]:.2f}"
        f" at start, python {machine.get('python')}, router forward loop: "
        f"{machine.get('router_forward_path', '?')}, elapsed {doc['elapsed_s']} s"
    ]
    for label, c in doc["configs"].items():
        share = c["stats"]["routing_cpu_share"]
        if c["runs"] > 1 and share["min"] is not None:
            notes.append(
                f"{label}: routing share over runs {_pct(share['min'])}..{_pct(share['max'])}, "
                f"req/s {_num(c['stats']['requests_per_s']['min'], 1)}.."
                f"{_num(c['stats']['requests_per_s']['max'], 1)}"
            )
        spread = c["process_cores_medians"]
        if spread:
            notes.append(
                f"{label}: cores per process: "
                + "; ".join(
                    f"{role}s " + " / ".join(f"{cores:.2f}" for cores in spread[role])
                    for role in spread
                )
            )
        if c["unstable_runs"]:
            notes.append(
                f"{label}: {c['unstable_runs']} run(s) lost or gained a process mid-window"
            )
        if c["error_samples"]:
            notes.append(f"{label} errors, e.g.: " + "; ".join(c["error_samples"]))
    neighbours = [run["neighbour_cores"] for run in doc["runs"] if run["neighbour_cores"]]
    if neighbours:
        notes.append(
            f"idle neighbour stacks used at most {max(neighbours):.2f} cores"
            " while another stack was measured"
        )
    return notes
