"""``switchboard bench e2e``: HTTP load through the whole stack, and what routing costs in it.

Each configuration (1 and 2 HTTP workers; 2 detokenizers and the built-in engine in
both) runs a fresh ``switchboard up`` stack (:mod:`.e2e_stack`), drives it with a closed
loop of streaming clients (:mod:`.e2e_load`), and reads the CPU time of every stack
process over the measured window. Repetitions interleave the configurations, rotating
their order; the report quotes medians (:mod:`.e2e_report`). The headline is the routing
processes' (router + detokenizer router) share of the stack's CPU, against a 10% target.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, Final

from switchboard.bench.e2e_client import ClientKind
from switchboard.bench.e2e_load import LoadPlan, event_loop_name, run_load
from switchboard.bench.e2e_report import E2ERun, render, summarize
from switchboard.bench.e2e_stack import HOST, Stack, StackConfig
from switchboard.bench.e2e_stats import (
    CpuSample,
    cpu_by_role,
    cpu_per_process,
    summarize_window,
)
from switchboard.bench.procs import BenchError
from switchboard.bench.report import machine_facts, publish

__all__ = [
    "FULL",
    "PROMPT",
    "QUICK",
    "E2EPlan",
    "SignalCounter",
    "run_e2e_bench",
    "run_interruptible",
    "run_suite",
]

#: The prompt every request sends (77 tokens with the built-in tokenizer).
PROMPT: Final = (
    "You are a helpful assistant. Summarize the following note in three sentences: the "
    "team moved the weekly planning meeting to Thursday morning, asked everyone to send "
    "their status updates a day earlier, and agreed to review the release checklist."
)

_CLIENT_LABELS: Final = {
    "raw": "raw HTTP/1.1 on asyncio streams, one keep-alive connection per client",
    "httpx": "httpx.AsyncClient, HTTP/1.1 keep-alive pool sized to the clients",
}


@dataclass(frozen=True)
class E2EPlan:
    """What one invocation runs."""

    repeats: int
    warmup_s: float
    measure_s: float
    #: Start every stack of a repetition at once, then measure them one after another
    #: (the others idle meanwhile). Saves a stack start per configuration: for --quick.
    start_together: bool
    workers: tuple[int, ...] = (1, 2)
    detokenizers: int = 2
    concurrency: int = 64
    max_new_tokens: int = 128
    step_time_s: float = 0.005
    client: ClientKind = "raw"


QUICK: Final = E2EPlan(repeats=1, warmup_s=2.0, measure_s=6.0, start_together=True)
FULL: Final = E2EPlan(repeats=3, warmup_s=5.0, measure_s=20.0, start_together=False)

Probe = tuple[dict[int, CpuSample], list[dict[int, CpuSample]]]


def _configs(plan: E2EPlan) -> list[StackConfig]:
    return [
        StackConfig(workers=n, detokenizers=plan.detokenizers, step_time_s=plan.step_time_s)
        for n in plan.workers
    ]


def measure(
    stack: Stack,
    plan: E2EPlan,
    repetition: int,
    *,
    idle: Sequence[Stack] = (),
    interrupted: Callable[[], bool] = lambda: False,
) -> E2ERun:
    """Load one serving stack for the plan's warm-up and window; the run's figures.

    ``idle`` stacks are sampled over the same window, to report what they took.
    KeyboardInterrupt once ``interrupted()`` turns true.
    """
    load = LoadPlan(
        concurrency=plan.concurrency,
        warmup_s=plan.warmup_s,
        measure_s=plan.measure_s,
        max_new_tokens=plan.max_new_tokens,
        prompt=PROMPT,
        client=plan.client,
    )

    def probe() -> Probe:
        return stack.cpu_sample(), [other.cpu_sample() for other in idle]

    result = run_load(HOST, stack.port, load, probe, interrupted)
    (before, idle_before), (after, idle_after) = result.probe_start, result.probe_end
    window_s = result.window_end - result.window_start
    used, unmatched = cpu_by_role(before, after)
    idle_cpu_s = sum(
        sum(cpu_by_role(earlier, later)[0].values())
        for earlier, later in zip(idle_before, idle_after, strict=True)
    )
    return E2ERun(
        config=stack.config.label,
        workers=stack.config.workers,
        repetition=repetition,
        load=summarize_window(result.records, result.window_start, result.window_end),
        cpu_s_by_role=used,
        cpu_s_per_process=cpu_per_process(before, after),
        loadgen_cpu_s=result.loadgen_cpu_s,
        unmatched_pids=unmatched,
        processes=stack.roles(),
        neighbour_cores=idle_cpu_s / window_s,
        start_s=stack.start_s,
    )


def _progress_line(run: E2ERun, plan: E2EPlan) -> str:
    figures = run.figures()
    share = figures["routing_cpu_share"]
    return (
        f"[{run.repetition + 1}/{plan.repeats}] {run.config:<9}: "
        f"{figures['requests_per_s'] or 0:7.1f} req/s, "
        f"{figures['output_tokens_per_s'] or 0:8,.0f} tok/s, "
        f"routing {'-' if share is None else f'{share * 100:.1f}%'}, "
        f"stack {figures['stack_cores'] or 0:.2f} cores, "
        f"load gen {figures['loadgen_cores'] or 0:.2f} cores, "
        f"errors {run.load.errors_total}, started in {run.start_s:.1f} s"
    )


@dataclass(frozen=True)
class _Hooks:
    """How a suite reports and is stopped: where stacks put run directories, a line per
    run, and two signal flags (stop after this; stop without waiting for the stacks)."""

    tmpdir: str | Path | None
    progress: Callable[[str], None]
    interrupted: Callable[[], bool]
    hurry: Callable[[], bool]


def _finished(run: E2ERun, stack: Stack, plan: E2EPlan, hooks: _Hooks) -> E2ERun:
    hooks.progress(_progress_line(run, plan) + f", stopped in {stack.stop_s:.1f} s")
    return replace(run, stop_s=stack.stop_s)


def _repetition(plan: E2EPlan, repetition: int, hooks: _Hooks) -> list[E2ERun]:
    """Every configuration once, in an order rotated by ``repetition``, each on a fresh stack."""
    configs = _configs(plan)
    shift = repetition % len(configs)
    order = [*configs[shift:], *configs[:shift]]
    runs: list[E2ERun] = []
    if plan.start_together:
        stacks = [Stack(config, hooks.tmpdir) for config in order]
        try:
            for stack in stacks:
                stack.launch()
            for stack in stacks:
                stack.wait_serving(hooks.interrupted)
            for index, stack in enumerate(stacks):
                run = measure(
                    stack, plan, repetition, idle=stacks[index + 1 :], interrupted=hooks.interrupted
                )
                stack.stop(hooks.hurry)
                runs.append(_finished(run, stack, plan, hooks))
        finally:
            for stack in stacks:
                stack.stop(hooks.hurry)
        return runs
    for config in order:
        stack = Stack(config, hooks.tmpdir)
        try:
            stack.launch()
            stack.wait_serving(hooks.interrupted)
            run = measure(stack, plan, repetition, interrupted=hooks.interrupted)
        finally:
            stack.stop(hooks.hurry)
        runs.append(_finished(run, stack, plan, hooks))
    return runs


def _facts() -> dict[str, Any]:
    facts = machine_facts()
    facts["event_loop"] = event_loop_name()
    facts["switchboard_env"] = sorted(k for k in os.environ if k.startswith("SWITCHBOARD_"))
    return facts


def run_suite(
    plan: E2EPlan,
    *,
    tmpdir: str | Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    interrupted: Callable[[], bool] = lambda: False,
    hurry: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Run every configuration ``plan.repeats`` times, interleaved; return the report.

    ``tmpdir`` is where the stacks make their run directories (default: the system's).
    ``interrupted`` is checked between runs and while stacks start; when it returns True
    the suite stops every stack and raises KeyboardInterrupt. ``hurry`` cuts the wait for
    a stopping stack short (its processes are then killed).
    """
    hooks = _Hooks(tmpdir, progress, interrupted, hurry)
    started = time.monotonic()
    machine = _facts()
    runs: list[E2ERun] = []
    for repetition in range(plan.repeats):
        if interrupted():
            raise KeyboardInterrupt
        runs += _repetition(plan, repetition, hooks)
    facts = {
        **asdict(plan),
        "client_label": f"{_CLIENT_LABELS[plan.client]}, {machine['event_loop']}",
    }
    return summarize(runs, plan=facts, machine=machine, elapsed_s=time.monotonic() - started)


class SignalCounter:
    """SIGINT/SIGTERM handler that only counts: the suite polls it at every wait (at
    least every 0.2 s), so nothing is interrupted halfway, least of all inside the event
    loop. After one signal the stacks are stopped politely; after two, without waiting."""

    def __init__(self) -> None:
        self.signals = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1

    def requested(self) -> bool:
        """Whether a signal arrived."""
        return self.signals > 0

    def hurried(self) -> bool:
        """Whether a second signal arrived."""
        return self.signals > 1


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_e2e_bench(*, quick: bool, json_path: str | None) -> int:
    """Run the suite, print the table, optionally write the JSON; the exit status.

    0 when it ran without a failed request (the routing share target is reported, not
    enforced); 1 when a request failed or a stack could not run; 130 when interrupted
    (every stack stopped, every temporary directory removed).
    """
    plan = QUICK if quick else FULL
    return run_interruptible(
        "e2e",
        lambda interrupt: run_suite(
            plan, progress=_stderr, interrupted=interrupt.requested, hurry=interrupt.hurried
        ),
        render,
        json_path,
    )


def run_interruptible(
    name: str,
    suite: Callable[[SignalCounter], dict[str, Any]],
    render_doc: Callable[[dict[str, Any]], str],
    json_path: str | None,
) -> int:
    """Run a stack benchmark ``suite`` with SIGINT/SIGTERM counted (not raised), then
    publish its document; the command's exit status (0, 1 on a failed request or a stack
    that could not run, 130 when interrupted)."""
    interrupt = SignalCounter()
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        doc = suite(interrupt)
    except KeyboardInterrupt:
        _stderr(f"switchboard bench {name}: interrupted; every stack was stopped")
        return 130
    except BenchError as exc:
        _stderr(f"switchboard bench {name}: {exc}")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    publish(render_doc(doc), doc, json_path)
    return 0 if doc["errors"] == 0 else 1
