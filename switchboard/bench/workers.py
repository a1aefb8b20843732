"""``switchboard bench workers``: many workers on one router, simulated.

The control side runs as ``switchboard up`` runs it, without its HTTP workers
(:mod:`switchboard.bench.workers_stack`); ``count`` simulated workers, each a real
worker link (:mod:`switchboard.bench.workers_sim`), register with it from a few
processes and heartbeat. Then, with every worker registered:

* **router idle CPU**: the router process's CPU seconds (user + system, from the kernel)
  over ``cpu_window_s`` of wall time, heartbeats flowing and the admin app polling, in
  ``cpu_windows`` windows;
* **router memory per worker**: the router's RSS with every worker registered (once
  they have settled), less its RSS before the first registered, over ``count``; and
  how fast it grows while heartbeats flow (over the CPU windows);
* **pause barrier**: ``POST /api/pause`` (``in_place``) on the admin app, timed from
  sending it to its answer, which must say ``complete`` with every worker among the
  acknowledgers; each is followed by a ``POST /api/continue`` (timed too);
* ``GET /api/workers`` (must list every worker) and ``GET /metrics`` on the admin app;
* **the ZeroMQ floor**: what the same connections cost a bare pyzmq process per worker
  (:mod:`switchboard.bench.workers_floor`), and the router's memory beyond it, its own.

Each figure is the median of its samples. Afterwards every simulated process says how
many of its links were still registered and which operation each applied last: all of
them must have applied the final continue (a worker that missed a broadcast shows up
there). :func:`run_workers` returns the run as a plain dict, what ``--json`` writes;
:mod:`switchboard.bench.workers_stats` holds the targets and the tables.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from types import FrameType
from typing import Any, Final

import httpx
import psutil

from router_core.control.commands import CONTINUE, LIST_WORKERS, PAUSE
from switchboard.bench.procs import BenchError, ProcessGroup
from switchboard.bench.report import machine_facts, publish
from switchboard.bench.workers_floor import measure_floor
from switchboard.bench.workers_sim import run_links, worker_ids
from switchboard.bench.workers_stack import ControlStack, control_stack
from switchboard.bench.workers_stats import missed_targets, report_table

__all__ = ["FULL", "QUICK", "WorkersPlan", "run_workers", "run_workers_bench"]

#: Links per simulated process by default: a few hundred share one event loop easily.
LINKS_PER_PROCESS: Final = 250


@dataclass(frozen=True)
class WorkersPlan:
    """What one run does: how many workers, over how many processes, how many samples."""

    count: int = 1000
    #: Simulated processes; 0: ``ceil(count / LINKS_PER_PROCESS)``.
    processes: int = 0
    #: Pause + continue pairs timed.
    barriers: int = 5
    #: ``GET /api/workers`` and ``GET /metrics`` requests timed, each.
    reads: int = 7
    cpu_windows: int = 3
    cpu_window_s: float = 5.0
    #: Wait after the last registration before measuring (a heartbeat round or two).
    settle_s: float = 2.0
    #: How long the simulated workers may take to register.
    register_timeout_s: float = 60.0
    #: The barrier's own deadline (the admin app's ``timeout_s``).
    barrier_timeout_s: float = 10.0

    def process_count(self) -> int:
        """The simulated processes this plan starts."""
        return self.processes or math.ceil(self.count / LINKS_PER_PROCESS)


FULL: Final = WorkersPlan()
QUICK: Final = WorkersPlan(barriers=3, reads=5, cpu_windows=2, cpu_window_s=3.0, settle_s=1.5)


def _cpu_s(process: psutil.Process) -> tuple[float, float]:
    """The process's CPU seconds (user + system): in all, and of its threads other than
    the main one (ZeroMQ's I/O and reaper threads, in a router)."""
    times = process.cpu_times()
    others = sum(t.user_time + t.system_time for t in process.threads() if t.id != process.pid)
    return float(times.user + times.system), float(others)


def _cores(process: psutil.Process, window_s: float) -> tuple[float, float]:
    """The process's CPU seconds over ``window_s`` of wall time, per second: in all, and
    of its threads other than the main one."""
    (cpu, others), wall = _cpu_s(process), time.monotonic()
    time.sleep(window_s)
    (cpu_after, others_after), elapsed = _cpu_s(process), time.monotonic() - wall
    return (cpu_after - cpu) / elapsed, (others_after - others) / elapsed


def _timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = call()
    return time.perf_counter() - started, response


def _ok(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise BenchError(f"{what}: HTTP {response.status_code}: {response.text[:200]}")
    return response.json()


@contextmanager
def _simulated(stack: ControlStack, plan: WorkersPlan) -> Iterator[list[dict[str, Any]]]:
    """Start the simulated workers, wait until every one is registered, yield; then stop
    them and fill the yielded list with each process's closing summary."""
    summaries: list[dict[str, Any]] = []
    run_dir, timeout = str(stack.run_dir), plan.register_timeout_s
    with ProcessGroup() as group:
        readers = [
            group.start(f"sim-workers-{index}", run_links, run_dir, ids, timeout)
            for index, ids in enumerate(worker_ids(plan.count, plan.process_count()))
        ]
        pids = [group.expect(reader, "ready", timeout + 10.0)["pid"] for reader in readers]
        yield summaries
        for pid in pids:
            os.kill(pid, signal.SIGTERM)  # each closes its links: they deregister
        summaries.extend(group.expect(reader, "closed", 30.0) for reader in readers)


def _barrier(http: httpx.Client, plan: WorkersPlan, action: str) -> dict[str, Any]:
    body: dict[str, Any] = {"timeout_s": plan.barrier_timeout_s}
    if action == "pause":
        body["mode"] = "in_place"
    command = PAUSE if action == "pause" else CONTINUE
    assert command.http is not None
    path = command.http.path
    wall, response = _timed(lambda: http.post(path, json=body))
    outcome = _ok(response, action)
    workers = sum(1 for name in outcome["acked"] if name != "engine")
    if not outcome["complete"] or workers != plan.count:
        raise BenchError(
            f"{action}: complete={outcome['complete']}, {workers} of {plan.count} workers "
            f"acknowledged, stragglers {outcome['stragglers'][:5]}"
        )
    return {"wall_s": wall, "router_s": outcome["elapsed_s"], "op_id": outcome["op_id"]}


def _reads(http: httpx.Client, plan: WorkersPlan) -> tuple[list[float], list[float]]:
    listed, scraped = [], []
    assert LIST_WORKERS.http is not None
    path = LIST_WORKERS.http.path
    for _ in range(plan.reads):
        wall, response = _timed(lambda: http.get(path))
        workers = _ok(response, f"GET {path}")["workers"]
        if len(workers) != plan.count:
            raise BenchError(f"GET {path} listed {len(workers)}, not {plan.count}")
        listed.append(wall)
        wall, response = _timed(lambda: http.get("/metrics"))
        if response.status_code != 200:
            raise BenchError(f"GET /metrics: HTTP {response.status_code}")
        scraped.append(wall)
    return listed, scraped


def run_workers(
    plan: WorkersPlan,
    *,
    progress: Callable[[str], None] = lambda line: None,
    on_registered: Callable[[ControlStack], None] | None = None,
) -> dict[str, Any]:
    """Run ``plan`` once (see the module docstring); the run as plain data.

    ``on_registered(stack)`` runs once every worker is registered and measured (a test
    takes the console's screenshot there). BenchError if anything could not complete.
    """
    started = time.monotonic()
    machine = machine_facts()
    with control_stack(engine=False) as stack:
        router = psutil.Process(stack.router_pid)
        headers = {"Authorization": f"Bearer {stack.token}"}
        with httpx.Client(
            base_url=stack.admin_url, headers=headers, timeout=30.0, trust_env=False
        ) as http:
            time.sleep(plan.settle_s)
            rss_empty = router.memory_info().rss
            with _simulated(stack, plan) as summaries:
                progress(f"{plan.count} workers registered; measuring")
                time.sleep(plan.settle_s)
                rss_full, grown_from = router.memory_info().rss, time.monotonic()
                cpu = [_cores(router, plan.cpu_window_s) for _ in range(plan.cpu_windows)]
                rss_later, grown_for = router.memory_info().rss, time.monotonic() - grown_from
                barriers = []
                for _ in range(plan.barriers):
                    barriers.append(
                        (_barrier(http, plan, "pause"), _barrier(http, plan, "continue"))
                    )
                listed, scraped = _reads(http, plan)
                if on_registered is not None:
                    on_registered(stack)
                last_op = barriers[-1][1]["op_id"]
    floor = measure_floor(plan.count)
    applied = sum(summary["last_op"].get(last_op, 0) for summary in summaries)
    registered = sum(summary["registered"] for summary in summaries)
    figures = {
        "pause_barrier_s": statistics.median(pause["wall_s"] for pause, _ in barriers),
        "continue_barrier_s": statistics.median(cont["wall_s"] for _, cont in barriers),
        "list_workers_s": statistics.median(listed),
        "metrics_scrape_s": statistics.median(scraped),
        "router_idle_cores": statistics.median(total for total, _ in cpu),
        "router_idle_cores_zmq_threads": statistics.median(others for _, others in cpu),
        "router_kib_per_worker": (rss_full - rss_empty) / 1024 / plan.count,
        "zmq_floor_kib_per_worker": floor,
        "router_kib_per_worker_growth_per_s": (rss_later - rss_full)
        / 1024
        / plan.count
        / grown_for,
    }
    figures["own_kib_per_worker"] = figures["router_kib_per_worker"] - floor
    return {
        "suite": "workers",
        "plan": {**asdict(plan), "processes": plan.process_count()},
        "machine": machine,
        "figures": figures,
        "samples": {
            "pause_wall_s": [pause["wall_s"] for pause, _ in barriers],
            "pause_router_s": [pause["router_s"] for pause, _ in barriers],
            "continue_wall_s": [cont["wall_s"] for _, cont in barriers],
            "list_workers_s": listed,
            "metrics_scrape_s": scraped,
            "router_idle_cores": [total for total, _ in cpu],
            "router_idle_cores_zmq_threads": [others for _, others in cpu],
            "router_rss_bytes": {"empty": rss_empty, "registered": rss_full, "later": rss_later},
            "router_rss_later_after_s": grown_for,
        },
        "workers_check": {
            "registered_at_stop": registered,
            "applied_last_continue": applied,
            "count": plan.count,
        },
        "elapsed_s": time.monotonic() - started,
    }


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_workers_bench(quick: bool, json_path: str | None, count: int | None = None) -> int:
    """Run the suite at ``count`` workers (default 1000), print the table, optionally
    write JSON. 0 when every target is met, 1 if one is missed or the run failed, 130
    after Ctrl-C or SIGTERM (every process it started stopped first)."""
    plan = QUICK if quick else FULL
    if count is not None:
        plan = replace(plan, count=count)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup must not be cut
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        doc = run_workers(plan, progress=_stderr)
    except KeyboardInterrupt:
        _stderr("switchboard bench: interrupted; every benchmark process was stopped")
        return 130
    except BenchError as exc:
        _stderr(f"switchboard bench: {exc}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    publish(report_table(doc), doc, json_path)
    return 1 if missed_targets(doc["figures"]) else 0
