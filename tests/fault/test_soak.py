"""Soak: half the measured peak load for 2 minutes (30 with ``make soak``), nothing grows.

First the stack's peak is measured: exact completions per second from 48 closed-loop
streaming clients. Then open-loop load at half that rate runs for a warm-up, stops
until nothing is in flight, and the baseline is read: the resident memory and open
file descriptors of the supervisor and every child, summed over their pids (``/proc``).
Then the soak itself, at the same rate, and the same quiet reading. What must hold:
resident memory grew by less than :data:`MAX_RSS_GROWTH`, open files did not grow,
every request was exact, and no process was restarted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.load import Load, RequestRecord
from tests.fault.harness.modes import scaled
from tests.fault.harness.procfs import fd_total, rss_total
from tests.fault.harness.stack import FaultStack, fault_stack

SOAK_S = scaled(60, 1800)
WARM_S = scaled(10, 120)
PEAK_S = 10.0
#: The first seconds of the peak run are not counted (the clients ramp up).
PEAK_RAMP_S = 2.0
PEAK_CLIENTS = 48
MAX_RSS_GROWTH = 0.05

pytestmark = [
    pytest.mark.fault,
    pytest.mark.integration,
    pytest.mark.timeout(SOAK_S + WARM_S + 300),
]


async def peak_rate(stack: FaultStack, plan: RequestPlan) -> float:
    """Exact completions per second under closed-loop load from PEAK_CLIENTS clients."""
    async with Load(stack.base_url, plan, label="soak-peak") as load:
        load.closed(PEAK_CLIENTS)
        started = time.monotonic()
        await asyncio.sleep(PEAK_S)
        ended = time.monotonic()
    counted = [
        r
        for r in load.records
        if r.ended is not None
        and started + PEAK_RAMP_S <= r.ended < ended
        and r.outcome is Outcome.OK
    ]
    return len(counted) / (ended - started - PEAK_RAMP_S)


async def run_at(
    stack: FaultStack, plan: RequestPlan, rate: float, seconds: float, label: str
) -> tuple[list[RequestRecord], list[tuple[int, int]]]:
    """Open-loop load at ``rate`` for ``seconds``, then nothing in flight; the records and
    ``(rss, fds)`` samples taken every few seconds while it ran."""
    samples: list[tuple[int, int]] = []
    async with Load(stack.base_url, plan, label=label) as load:
        load.open(rate)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            pids = stack.stack_pids()
            samples.append((rss_total(pids), fd_total(pids)))
    return load.records, samples


async def soak(stack: FaultStack, figures: Figures) -> list[RequestRecord]:
    plan = RequestPlan.build("soak")
    peak = await peak_rate(stack, plan)
    rate = peak / 2
    figures.set("peak_rps", peak)
    figures.set("soak_rps", rate)
    warm, _ = await run_at(stack, plan, rate, WARM_S, "soak-warm")
    pids = stack.stack_pids()
    rss_before, fds_before = rss_total(pids), fd_total(pids)
    records, samples = await run_at(stack, plan, rate, SOAK_S, "soak")
    pids_after = stack.stack_pids()
    rss_after, fds_after = rss_total(pids_after), fd_total(pids_after)
    figures.outcomes(warm, "warm-up")
    figures.outcomes(records, "soak")
    figures.set("soak_s", SOAK_S)
    figures.set("requests", len(records))
    figures.set("rss_before_mib", rss_before / 2**20)
    figures.set("rss_after_mib", rss_after / 2**20)
    figures.set("rss_growth_pct", round(100 * (rss_after - rss_before) / rss_before, 2))
    figures.set("rss_peak_mib", max(rss for rss, _fds in samples) / 2**20)
    figures.set("fds_before", fds_before)
    figures.set("fds_after", fds_after)
    figures.set("fds_peak_under_load", max(fds for _rss, fds in samples))
    figures.set("pids_same", sorted(pids) == sorted(pids_after))
    figures.failures([*warm, *records])
    return [*warm, *records]


class TestSoak:
    def test_half_peak_load_grows_nothing(self, tmp_path: Path) -> None:
        """Half the measured peak for SOAK_S seconds: RSS +<5%, no more open files, every
        request exact, no restart."""
        figures = Figures(f"soak {SOAK_S} s at half peak")
        with fault_stack(tmp_path) as stack:
            roles = stack.roles()
            records = asyncio.run(soak(stack, figures))
            restarts = stack.log().count("exited unexpectedly")
            figures.set("restarts", restarts)
            figures.report()
            values = figures.values
            assert restarts == 0 and stack.roles() == roles
            assert values["rss_growth_pct"] < 100 * MAX_RSS_GROWTH
            assert values["fds_after"] <= values["fds_before"]
            failed = [r.describe() for r in records if r.outcome is not Outcome.OK]
            assert failed == [], failed[:10]
