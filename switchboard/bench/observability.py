"""``switchboard bench observability``: what metrics and tracing cost in throughput.

Three modes of one stack shape (2 HTTP workers, 2 detokenizers, the built-in engine)
run side by side in one invocation, the repetitions interleaved with their order
rotated: everything off (``--no-metrics``, no OTLP endpoint); metrics on with traces
sampled at 1% (``parentbased_traceidratio``); metrics on with every request traced.
Traces go to a local OTLP/HTTP receiver that accepts and discards them, and while
metrics are on ``/metrics`` is scraped every few seconds, as Prometheus would. Each
load is the end-to-end benchmark's closed loop of streaming clients (:mod:`.e2e`).

The headline ``observability_overhead`` is the median over repetitions of the paired
ratio (metrics + 1% traces requests/s) / (off requests/s), against a 0.95 target.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

import httpx

from switchboard.bench.e2e import E2EPlan, measure, run_interruptible
from switchboard.bench.e2e_report import E2ERun
from switchboard.bench.e2e_stack import HOST, Stack, StackConfig
from switchboard.bench.report import machine_facts
from switchboard.otlp_receiver import OtlpReceiver

__all__ = [
    "FULL",
    "MODES",
    "OVERHEAD_MINIMUM",
    "QUICK",
    "render",
    "run_observability_bench",
    "run_suite",
    "summarize",
]

#: The target: metrics on and 1% of traces cost at most 5% of the throughput.
OVERHEAD_MINIMUM: Final = 0.95
#: Seconds between scrapes of ``/metrics`` while metrics are on.
SCRAPE_INTERVAL_S: Final = 5.0

OFF: Final = "off"
SAMPLED: Final = "metrics + 1% traces"
TRACED: Final = "metrics + 100% traces"


@dataclass(frozen=True)
class Mode:
    """One way of running the stack: metrics on or off, and the trace sampling ratio."""

    name: str
    metrics: bool
    #: Share of requests traced; None: tracing off (no endpoint at all).
    sample_ratio: float | None


MODES: Final = (
    Mode(OFF, metrics=False, sample_ratio=None),
    Mode(SAMPLED, metrics=True, sample_ratio=0.01),
    Mode(TRACED, metrics=True, sample_ratio=1.0),
)

QUICK: Final = E2EPlan(repeats=1, warmup_s=2.0, measure_s=6.0, start_together=False, workers=(2,))
FULL: Final = E2EPlan(repeats=3, warmup_s=4.0, measure_s=15.0, start_together=False, workers=(2,))


def stack_config(mode: Mode, plan: E2EPlan, otlp_endpoint: str) -> StackConfig:
    """The stack of ``mode``: its metrics flag, trace endpoint and sampler."""
    env: tuple[tuple[str, str], ...] = ()
    if mode.sample_ratio is not None:
        env = (
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", repr(mode.sample_ratio)),
        )
    return StackConfig(
        workers=plan.workers[0],
        detokenizers=plan.detokenizers,
        step_time_s=plan.step_time_s,
        metrics=mode.metrics,
        otlp_endpoint="" if mode.sample_ratio is None else otlp_endpoint,
        env=env,
        name=mode.name,
    )


class Scraper:
    """Reads ``/metrics`` every :data:`SCRAPE_INTERVAL_S` from a thread while open."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=5.0) as client:
            while not self._stop.wait(SCRAPE_INTERVAL_S):
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.scrapes += 1
                self.failures += 0 if ok else 1


def _one_mode(
    mode: Mode, plan: E2EPlan, repetition: int, endpoint: str, interrupted: Callable[[], bool]
) -> tuple[E2ERun, dict[str, int]]:
    stack = Stack(stack_config(mode, plan, endpoint))
    try:
        stack.launch()
        stack.wait_serving(interrupted)
        if not mode.metrics:
            return measure(stack, plan, repetition, interrupted=interrupted), {}
        with Scraper(f"http://{HOST}:{stack.admin_port}/metrics") as scraper:
            run = measure(stack, plan, repetition, interrupted=interrupted)
        return run, {"scrapes": scraper.scrapes, "scrape_failures": scraper.failures}
    finally:
        stack.stop()


def run_suite(
    plan: E2EPlan,
    *,
    progress: Callable[[str], None] = lambda line: None,
    interrupted: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Every mode ``plan.repeats`` times, interleaved and rotated; the report document."""
    plan = replace(plan, workers=plan.workers[:1])
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    with OtlpReceiver(discard=True) as receiver:
        for repetition in range(plan.repeats):
            shift = repetition % len(MODES)
            for mode in (*MODES[shift:], *MODES[:shift]):
                if interrupted():
                    raise KeyboardInterrupt
                run, scrapes = _one_mode(mode, plan, repetition, receiver.endpoint, interrupted)
                figures = run.figures()
                progress(
                    f"[{repetition + 1}/{plan.repeats}] {mode.name:<22}: "
                    f"{figures['requests_per_s'] or 0:6.1f} req/s, "
                    f"stack {figures['stack_cores'] or 0:.2f} cores, "
                    f"errors {run.load.errors_total}"
                )
                runs.append({"mode": mode.name, **scrapes, **run.to_json()})
        exports = receiver.exports
    doc = summarize(runs)
    doc.update(
        plan=asdict(plan),
        machine=machine_facts(),
        elapsed_s=round(time.monotonic() - started, 1),
        otlp_exports_received=exports,
    )
    return doc


def _ratios(runs: Sequence[dict[str, Any]], mode: str) -> list[float]:
    """Per repetition: ``mode``'s requests/s over the ``off`` run's of the same repetition."""
    by_rep: dict[int, dict[str, float]] = {}
    for run in runs:
        by_rep.setdefault(run["repetition"], {})[run["mode"]] = run["figures"]["requests_per_s"]
    return [
        rates[mode] / rates[OFF]
        for rates in by_rep.values()
        if rates.get(OFF) and rates.get(mode) is not None
    ]


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians per mode, the paired ratios and the headline, from the runs' JSON."""
    modes: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        mine = [run for run in runs if run["mode"] == mode.name]
        modes[mode.name] = {
            figure: _median([run["figures"][figure] for run in mine])
            for figure in ("requests_per_s", "ttft_p50_s", "e2e_p50_s", "stack_cores")
        }
    sampled, traced = _ratios(runs, SAMPLED), _ratios(runs, TRACED)
    errors = sum(run["load"]["errors_total"] for run in runs)
    overhead = _median(sampled)
    return {
        "suite": "observability",
        "observability_overhead": overhead,
        "observability_overhead_full_tracing": _median(traced),
        "ratios": {SAMPLED: sampled, TRACED: traced},
        "target": OVERHEAD_MINIMUM,
        "verdict": "n/a" if overhead is None else _verdict(overhead),
        "modes": modes,
        "errors": errors,
        "runs": list(runs),
    }


def _verdict(overhead: float) -> str:
    return "PASS" if overhead >= OVERHEAD_MINIMUM else "FAIL"


def render(doc: dict[str, Any]) -> str:
    """The printed table: one row per mode, then the ratios."""
    lines = [
        "Observability overhead (2 workers, 2 detokenizers, built-in engine; "
        f"{doc['plan']['concurrency']} streaming clients, {doc['plan']['repeats']} "
        "interleaved repetitions, medians)",
        "",
        f"{'mode':<24}{'req/s':>9}{'TTFT p50':>11}{'e2e p50':>10}{'stack cores':>13}",
    ]
    for name, figures in doc["modes"].items():
        rate, ttft, e2e, cores = (
            figures[k] for k in ("requests_per_s", "ttft_p50_s", "e2e_p50_s", "stack_cores")
        )
        lines.append(
            f"{name:<24}{_fmt(rate, '.1f'):>9}{_fmt(ttft, '.3f', 's'):>11}"
            f"{_fmt(e2e, '.3f', 's'):>10}{_fmt(cores, '.2f'):>13}"
        )
    overhead, full = doc["observability_overhead"], doc["observability_overhead_full_tracing"]
    lines += [
        "",
        f"observability_overhead (metrics + 1% traces / off): {_fmt(overhead, '.3f')} "
        f"(target >= {doc['target']}: {doc['verdict']})",
        f"with every request traced (metrics + 100% traces / off): {_fmt(full, '.3f')}",
        f"failed requests: {doc['errors']}",
    ]
    return "\n".join(lines)


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def run_observability_bench(*, quick: bool, json_path: str | None) -> int:
    """Run the suite, print the table, optionally write the JSON; the exit status.

    0 when every request succeeded (the target is reported, not enforced), 1 when one
    failed or a stack could not run, 130 when interrupted (every stack stopped).
    """
    plan = QUICK if quick else FULL
    return run_interruptible(
        "observability",
        lambda interrupt: run_suite(plan, progress=_stderr, interrupted=interrupt.requested),
        render,
        json_path,
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
