"""A stalled worker (SIGSTOP) under load: the others keep their pace, the router stays small.

A three-worker stack gets open-loop streaming load (a fixed rate whatever the answers,
as independent clients send it; the kernel keeps handing a share of new connections to
the stopped worker, whose requests then wait). After a baseline, worker ``w1`` is
SIGSTOPped until the router has declared it dead, then SIGCONTed. What must hold:

* the other workers' exact completions per second during the stall are at least
  :data:`MIN_RATIO` of theirs before it, measured in the same run;
* the router's resident memory grows by at most :data:`ROUTER_GROWTH_BYTES` during it;
* the admin API shows ``w1`` ``unresponsive`` first, then ``dead``, and ``serving``
  again (same pid) after SIGCONT;
* no request has a wrong text or hangs; every request the other workers took is exact.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load, RequestRecord
from tests.fault.harness.procfs import rss_total
from tests.fault.harness.recovery import poll
from tests.fault.harness.stack import FaultStack, StackConfig, fault_stack

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

VICTIM = "worker-w1"
#: Enough requests per window that the workers' random shares of them vary by ~3 %.
RATE = 45.0
WARM_S = 3.0
BASELINE_S = 8.0
#: The stall is measured from this long after SIGSTOP (requests already on their way to
#: the stopped worker's clients settle) until SIGCONT.
SETTLE_S = 1.0
#: After the router declared the worker dead, the stall goes on this long.
DEAD_FOR_S = 2.0
MIN_RATIO = 0.9
ROUTER_GROWTH_BYTES = 8 * 1024 * 1024


def exact_rate(records: list[RequestRecord], start: float, end: float, victim: str) -> float:
    """Exact requests per second that workers other than ``victim`` ended in [start, end)."""
    done = [
        r
        for r in records
        if r.ended is not None
        and start <= r.ended < end
        and r.outcome is Outcome.OK
        and r.worker not in (None, victim)
    ]
    return len(done) / (end - start)


async def watch_worker(
    admin: httpx.AsyncClient, worker_id: str, states: list[tuple[float, str, int]]
) -> None:
    """Record ``(time, state, pid)`` of ``worker_id`` each time it changes, until cancelled."""
    while True:
        try:
            listed = (await admin.get("/api/workers")).json()["workers"]
        except (httpx.HTTPError, ValueError, KeyError):
            listed = []
        for worker in listed:
            now = (worker["state"], worker["pid"])
            if worker["id"] == worker_id and (not states or states[-1][1:] != now):
                states.append((time.monotonic(), *now))
        await asyncio.sleep(0.1)


async def stall_under_load(stack: FaultStack, figures: Figures) -> list[RequestRecord]:
    plan = RequestPlan.build("stall", min_tokens=16, max_tokens=48)
    census = ConnectionCensus(stack.port, stack.workers)
    victim_pid = stack.pid(VICTIM)
    router_pid = stack.pid("router")
    detok_pids = [pid for role, pid in stack.roles().items() if role.startswith("detokenizer-")]
    states: list[tuple[float, str, int]] = []
    async with (
        stack.async_admin() as admin,
        Load(stack.base_url, plan, label="stall", census=census) as load,
    ):
        watcher = asyncio.create_task(watch_worker(admin, "w1", states))
        load.open(RATE)
        started = time.monotonic()
        await asyncio.sleep(WARM_S + BASELINE_S)
        router_before, detok_before = rss_total([router_pid]), rss_total(detok_pids)
        stopped_at = time.monotonic()
        os.kill(victim_pid, signal.SIGSTOP)
        router_peak, detok_peak = router_before, detok_before
        try:

            async def dead() -> bool:
                nonlocal router_peak, detok_peak
                router_peak = max(router_peak, rss_total([router_pid]))
                detok_peak = max(detok_peak, rss_total(detok_pids))
                return bool(states) and states[-1][1] == "dead"

            dead_at = await poll(dead, 30.0, "w1 declared dead")
            await asyncio.sleep(DEAD_FOR_S)
        finally:
            continued_at = time.monotonic()
            os.kill(victim_pid, signal.SIGCONT)

        async def back() -> bool:
            latest = states[-1] if states else (0.0, "", 0)
            return latest[1:] == ("serving", victim_pid) and latest[0] > continued_at

        back_at = await poll(back, 30.0, "w1 serving again after SIGCONT")
        await asyncio.sleep(3.0)
        watcher.cancel()
    records = load.records
    baseline = exact_rate(records, started + WARM_S, stopped_at, VICTIM)
    stalled = exact_rate(records, stopped_at + SETTLE_S, continued_at, VICTIM)
    figures.outcomes(records)
    figures.outcomes([r for r in records if r.worker not in (None, VICTIM)], "other workers")
    figures.outcomes([r for r in records if r.worker in (None, VICTIM)], "w1 or unknown")
    figures.set("rate_rps", RATE)
    figures.set("others_exact_rps_before", baseline)
    figures.set("others_exact_rps_stalled", stalled)
    figures.set("ratio", stalled / baseline if baseline else 0.0)
    figures.set("stall_s", continued_at - stopped_at)
    figures.set("declared_dead_after_s", dead_at - stopped_at)
    figures.set("serving_again_after_cont_s", back_at - continued_at)
    figures.set("router_rss_growth_bytes", router_peak - router_before)
    figures.set("detokenizers_rss_growth_bytes", detok_peak - detok_before)
    figures.set("w1_states", [f"{state}@{at - stopped_at:+.1f}s" for at, state, _pid in states])
    figures.failures(records)
    return records


class TestStalledWorker:
    def test_others_keep_their_pace(self, tmp_path: Path) -> None:
        """SIGSTOP one of three workers under open-loop load until it is declared dead,
        then SIGCONT: the others' pace holds, the router stays bounded, the worker is
        marked unresponsive, dead, then serving again."""
        figures = Figures("SIGSTOP worker-w1 (stalled worker)")
        with fault_stack(tmp_path, StackConfig(workers=3)) as stack:
            records = asyncio.run(stall_under_load(stack, figures))
            figures.report()
            values = figures.values
            seen_states = [entry.split("@")[0] for entry in values["w1_states"]]
            assert values["ratio"] >= MIN_RATIO
            assert values["router_rss_growth_bytes"] <= ROUTER_GROWTH_BYTES
            assert "unresponsive" in seen_states, "w1 was never marked unresponsive"
            assert seen_states.index("unresponsive") < seen_states.index("dead")
            assert figures.counts["all"]["wrong text"] == 0
            assert figures.counts["all"]["hung"] == 0
            others = [r for r in records if r.worker not in (None, VICTIM)]
            assert [r.describe() for r in others if r.outcome is not Outcome.OK] == []
