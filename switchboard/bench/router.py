"""``switchboard bench router``: the router's forward hop and backward split, side by side.

Each repetition runs every configuration once, rotating the order of the paths, so
machine noise spreads over all of them; the report gives medians and ratios of medians.
Forward: direct vs ``zmq.proxy`` vs the real router (:mod:`switchboard.bench.forward`).
Backward: the seed's pickle design vs Switchboard's frames (:mod:`.backward`).
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final, TypeVar

from switchboard.bench.backward import IMPLS, SplitRun, measure_split
from switchboard.bench.forward import PATHS, HopRun, measure_forward
from switchboard.bench.procs import BenchError, trial_dir
from switchboard.bench.report import (
    machine_facts,
    publish,
    render,
    size_label,
    split_label,
    summarize,
)

__all__ = ["FULL", "QUICK", "BenchPlan", "run_router_bench", "run_suite"]

T = TypeVar("T")


@dataclass(frozen=True)
class BenchPlan:
    """What one invocation runs: sizes, batch sizes, message counts, repetitions."""

    repeats: int
    #: Payload bytes -> timed messages per forward trial.
    forward_messages: dict[int, int]
    #: Batch size -> requests per split trial.
    split_requests: dict[int, int]
    #: Batch size of the extra logprobs (top-5) split configuration; None to skip it.
    logprobs_batch: int | None = 64


QUICK: Final = BenchPlan(
    repeats=3,
    forward_messages={64: 40_000, 1024: 40_000, 16384: 6_000},
    split_requests={1: 3_000, 8: 8_000, 64: 16_384, 256: 16_384},
)

FULL: Final = BenchPlan(
    repeats=7,
    forward_messages={64: 100_000, 1024: 100_000, 16384: 20_000},
    split_requests={1: 12_000, 8: 32_000, 64: 65_536, 256: 65_536},
)


def _rotated(items: Sequence[T], by: int) -> list[T]:
    """``items`` starting at ``by``: each repetition runs the paths in another order."""
    shift = by % len(items)
    return [*items[shift:], *items[:shift]]


def run_suite(
    plan: BenchPlan,
    *,
    root: str | Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    interrupted: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Run every configuration ``plan.repeats`` times, interleaved; return the report.

    ``interrupted`` is checked before every trial; when it returns True the suite stops
    with KeyboardInterrupt.
    """

    def check() -> None:
        if interrupted():
            raise KeyboardInterrupt

    started = time.monotonic()
    machine = machine_facts()
    hop_runs: list[HopRun] = []
    split_runs: list[SplitRun] = []
    split_configs = [(b, False) for b in plan.split_requests]
    if plan.logprobs_batch is not None:
        split_configs.append((plan.logprobs_batch, True))
    with trial_dir(root, prefix="sb-bench-") as base:
        for rep in range(plan.repeats):
            for size, count in plan.forward_messages.items():
                for path in _rotated(PATHS, rep):
                    check()
                    run = measure_forward(path, size, count, root=base)
                    hop_runs.append(run)
                    progress(
                        f"[{rep + 1}/{plan.repeats}] forward {path:<11} {size_label(size):>6}: "
                        f"{run.rate:>10,.0f} msgs/s{'' if run.complete else '  INCOMPLETE'}"
                    )
            for batch_size, logprobs in split_configs:
                requests = plan.split_requests.get(batch_size, max(plan.split_requests.values()))
                for impl in _rotated(IMPLS, rep):
                    check()
                    split = measure_split(impl, batch_size, requests, logprobs=logprobs, root=base)
                    split_runs.append(split)
                    progress(
                        f"[{rep + 1}/{plan.repeats}] split   {impl:<11} "
                        f"B={split_label(batch_size, logprobs):<11}: "
                        f"{split.rate:>10,.0f} req/s{'' if split.complete else '  INCOMPLETE'}"
                    )
    plan_facts = {**asdict(plan), "workers": 4, "logprobs_top_k": 5}
    return summarize(
        hop_runs,
        split_runs,
        machine=machine,
        plan=plan_facts,
        elapsed_s=time.monotonic() - started,
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Interrupt:
    """SIGINT/SIGTERM handler: raise KeyboardInterrupt once and remember it.

    The exception alone is not enough: raised inside a ``__del__`` (a finalizer of a
    pipe or a semaphore) Python prints and ignores it, so the suite also checks the flag
    before every trial. A second signal only sets the flag, so that it cannot cut the
    cleanup short.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            raise KeyboardInterrupt


def run_router_bench(quick: bool, json_path: str | None) -> int:
    """Run the suite, print the table, optionally write JSON. 0 unless it could not run.

    The targets are reported (PASS/BELOW), not enforced. Ctrl-C or SIGTERM stops every
    benchmark process and removes the temporary directories (exit status 130).
    """
    plan = QUICK if quick else FULL
    interrupt = _Interrupt()
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        doc = run_suite(
            plan,
            root=tempfile.gettempdir(),
            progress=_stderr,
            interrupted=lambda: interrupt.requested,
        )
    except KeyboardInterrupt:
        _stderr("switchboard bench: interrupted; every benchmark process was stopped")
        return 130
    except BenchError as exc:
        _stderr(f"switchboard bench: {exc}")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    publish(render(doc), doc, json_path)
    return 0
