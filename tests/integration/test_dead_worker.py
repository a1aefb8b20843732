"""A worker killed mid-stream: the others keep their outputs, the router's memory stays
bounded, and the dead worker is detected, removed and its drops counted."""

from __future__ import annotations

import time
from functools import partial
from itertools import pairwise
from typing import Any

import psutil
import pytest

from tests.integration.harness import Stack, wait_until

pytestmark = pytest.mark.integration

MB = 1024 * 1024
#: Per batch: 4 rows of 16 KiB per worker, so a message to one worker is 64 KiB.
ROWS_PER_WORKER = 4
ROW_BYTES = 16 * 1024
BATCHES_PER_S = 400
#: Messages a destination may queue when its socket refuses them: 100 x 64 KiB = 6.4 MiB.
#: The backlog is bounded in messages, not bytes: at the default (1000) a dead worker
#: pins up to 64 MiB of these messages until its heartbeat expires (35 MB measured).
BACKLOG = 100
PUSHED_AT_DEAD_WORKER = 120 * MB
RSS_GROWTH_LIMIT = 50 * MB
HEARTBEAT_TIMEOUT_S = 1.5


def rows_between(history: list[dict[str, Any]], key: Any, start: float, end: float) -> int:
    """How much ``key(report)`` grew between monotonic times ``start`` and ``end``."""
    window = [r for r in history if start <= r["mono"] <= end]
    assert len(window) >= 2, "too few reports in the window"
    return int(key(window[-1]) - key(window[0]))


def longest_gap(history: list[dict[str, Any]], start: float, end: float) -> float:
    """The longest time between two increases of ``rows`` within [start, end]."""
    window = [r for r in history if start <= r["mono"] <= end]
    increases = [start]
    for before, after in pairwise(window):
        if after["rows"] > before["rows"]:
            increases.append(after["mono"])
    increases.append(end)
    return max(b - a for a, b in pairwise(increases))


def has_rows(count: int, report: dict[str, Any]) -> bool:
    return bool(report["rows"] >= count)


class TestDeadWorker:
    def test_killed_worker_is_dropped_without_hurting_the_others(self, stack: Stack) -> None:
        """SIGKILL one of 3 workers while the engine streams outputs to all 3 through the
        router: the 2 survivors keep receiving every row at the same pace (no gap over
        1 s), the router's RSS grows < 50 MB while 120 MB are pushed at the dead worker,
        the dead worker leaves list_workers within heartbeat timeout + 1 s, and its
        drops are counted."""
        router = stack.start_router("--backlog", str(BACKLOG))
        workers = [stack.start_worker(f"w{i}") for i in range(3)]
        survivors, victim = workers[:2], workers[2]
        engine = stack.start_engine(
            *[arg for w in workers for arg in ("--emit-to", w.address)],
            "--emit-rate",
            str(BATCHES_PER_S),
            "--rows-per-address",
            str(ROWS_PER_WORKER),
            "--row-bytes",
            str(ROW_BYTES),
            wait_live=router,
        )
        router_proc = psutil.Process(router.process.pid)
        for worker in workers:
            worker.wait_for(lambda r: r["rows"] >= 400, 10.0, "outputs flowing")
        baseline = max(router_proc.memory_info().rss for _ in range(5))

        def emitted_to(address: str) -> int:
            return int(engine.report()["emitted_bytes_by_address"].get(address, 0))

        before_kill = victim.report()
        loads_before = engine.report()["loads_sent"]
        pushed_before = emitted_to(victim.address)
        victim.process.kill()
        killed_at = time.monotonic()

        peak = baseline
        gone_after: float | None = None

        def pushed_enough_and_dead() -> bool:
            nonlocal peak, gone_after
            for handle in (*survivors, engine):
                handle.process.assert_running()
            peak = max(peak, router_proc.memory_info().rss)
            if gone_after is None:
                listed = {v["id"] for v in router.ctl("list_workers")}
                assert {"w0", "w1"} <= listed, f"a survivor left the registry: {listed}"
                if "w2" not in listed:
                    gone_after = time.monotonic() - killed_at
            return gone_after is not None and (
                emitted_to(victim.address) - pushed_before >= PUSHED_AT_DEAD_WORKER
            )

        wait_until(pushed_enough_and_dead, 30.0, "120 MB pushed at the dead worker", 0.05)
        window_end = time.monotonic()
        assert gone_after is not None and gone_after <= HEARTBEAT_TIMEOUT_S + 1.0, gone_after
        growth = peak - baseline
        assert growth < RSS_GROWTH_LIMIT, f"router RSS grew {growth / MB:.1f} MB"

        status = router.ctl("status")
        assert status["counters"]["dead_workers"] == {"heartbeat_timeout": 1}
        assert status["workers"] == {"serving": 2}

        # The survivors kept pace with the engine and with each other, with no long gap
        # (loosely: on a loaded 2-core machine a worker may lag the engine by a second).
        engine_history = stack.reports.history("engine")
        received = {}
        for worker in survivors:
            history = stack.reports.history(worker.name)
            got = rows_between(history, lambda r: r["rows"], killed_at, window_end)
            sent = rows_between(
                engine_history,
                lambda r, a=worker.address: r["emitted_rows_by_address"][a],
                killed_at,
                window_end,
            )
            assert got >= 0.6 * sent, f"{worker.name} got {got} of {sent} rows after the kill"
            gap = longest_gap(history, killed_at, window_end)
            assert gap < 1.0, f"{worker.name} had a {gap:.2f}s gap in its outputs"
            received[worker.name] = got
        slower, faster = sorted(received.values())
        assert slower >= 0.75 * faster, f"survivors diverged: {received}"

        # Every row sent to a survivor arrives, once the engine stops.
        assert engine.process.terminate() == 0
        final = stack.reports.wait_for(
            "engine", lambda r: r["state"] == "stopped", 5.0, "the engine's last report"
        )
        for worker in survivors:
            sent_rows = final["emitted_rows_by_address"][worker.address]
            report = worker.wait_for(partial(has_rows, sent_rows), 10.0, "every row")
            assert report["rows"] == sent_rows
            assert report["misdelivered"] == 0 and report["bad_rows"] == 0

        # Rows meant for the dead worker are counted as dropped, not lost silently. The
        # counter mixes units: unknown_worker counts rows, backlog_full and dead_worker
        # count messages, which may be load snapshots forwarded to the worker too.
        dropped = router.ctl("status")["counters"]["dropped"]
        lost_rows = final["emitted_rows_by_address"][victim.address] - before_kill["rows"]
        counted_rows = dropped.get("unknown_worker", 0) + ROWS_PER_WORKER * (
            dropped.get("backlog_full", 0) + dropped.get("dead_worker", 0)
        )
        loads = final["loads_sent"] - loads_before
        assert dropped.get("unknown_worker", 0) > 0
        assert 0.9 * lost_rows <= counted_rows <= lost_rows + ROWS_PER_WORKER * loads, (
            dropped,
            lost_rows,
            loads,
        )
