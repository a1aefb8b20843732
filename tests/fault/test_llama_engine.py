"""Faults with a real engine: the llama.cpp engine on the tiny generated model.

Every request's text is predicted by llama.cpp itself (``harness/llama_plan.py``:
llama-cpp-python's own ``Llama``, greedy, the prompt alone), so a request given another's
output, a token lost or doubled across a retract, or a stale KV cell read after a
restart shows as a wrong text. Three faults, each on its own stack:

* **SIGKILL engine** under streaming load: the supervisor restarts it (the model loads
  again), the requests in flight end with a clear error, the rest and every request
  after the restart are exact;
* **pause/continue storm** under streaming load: four admin clients send pauses in every
  mode and continues in random order; ``abort`` ends the running requests with a clear
  abort, ``retract`` and ``in_place`` leave every stream's text unchanged; afterwards
  the router, every worker and the engine are in one pause state (within
  ``pause_agreement.SETTLE_S``), a continue lets requests through exactly again, and the
  engine's KV cells are all free;
* **soak** at a steady rate (30 s; 10 minutes with ``make soak``): every request exact,
  the engine's resident memory flat, and its KV cells all free once the load stops.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.fault.harness.classify import Outcome
from tests.fault.harness.figures import Figures
from tests.fault.harness.llama_plan import llama_plan, model_path
from tests.fault.harness.load import Load
from tests.fault.harness.modes import scaled
from tests.fault.harness.pause_agreement import settle
from tests.fault.harness.procfs import rss_total
from tests.fault.harness.scenario import kill_during_load
from tests.fault.harness.stack import FaultStack, StackConfig, fault_stack
from tests.fault.test_kill_roles import check

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

REQUESTS = scaled(150, 1500)
STORM_OPERATIONS = scaled(400, 4000)
STORM_CLIENTS = 4
SOAK_S = scaled(30, 600)
SOAK_RPS = 6.0
#: The engine's resident memory may grow this much over the soak (allocator noise).
MAX_ENGINE_RSS_GROWTH = 0.05
#: How long the engine's load snapshot may take to show every cell free.
FREED_S = 10.0


def llama_stack(tmp_path: Path) -> AbstractContextManager[FaultStack]:
    """A fault stack running the llama.cpp engine on the tiny model."""
    return fault_stack(tmp_path, StackConfig(model=model_path()))


async def engine_load(stack: FaultStack) -> dict[str, Any]:
    async with stack.async_admin() as admin:
        load: dict[str, Any] = (await admin.get("/api/load")).json()["load"]
    return load


async def kv_freed(stack: FaultStack, figures: Figures) -> None:
    """Wait (bounded) until the engine reports no running request and no KV cell used."""
    deadline = time.monotonic() + FREED_S
    load = await engine_load(stack)
    while (load["kv_cells_used"], load["running"]) != (0, 0) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        load = await engine_load(stack)
    figures.set("kv_cells_used_after", load["kv_cells_used"])
    figures.set("kv_cells_total", load["kv_cells_total"])


class TestLlamaEngineFaults:
    def test_kill_engine(self, tmp_path: Path) -> None:
        """The engine comes back with the model loaded again; in-flight requests end with
        a clear error, and every other request is exact."""
        with llama_stack(tmp_path) as stack:
            plan = llama_plan("llama-kill")
            run = asyncio.run(
                kill_during_load(stack, "engine", "llama-kill", requests=REQUESTS, plan=plan)
            )
            check(run, "SIGKILL engine", REQUESTS)

    def test_pause_storm_under_load(self, tmp_path: Path) -> None:
        """Pauses in every mode and continues under load: no wrong or hung request, one
        pause state everywhere after, every KV cell free."""
        figures = Figures("pause/continue storm under load", "llama-cpp")
        with llama_stack(tmp_path) as stack:
            asyncio.run(storm_under_load(stack, figures))
            figures.report()
        values, counts = figures.values, figures.counts["all"]
        assert counts[Outcome.WRONG_TEXT.value] == 0 and counts[Outcome.HUNG.value] == 0
        assert counts[Outcome.OK.value] > 0, counts
        assert values["operations"] == STORM_OPERATIONS
        assert set(values["statuses"]) <= {"200", "504"}, values["statuses"]
        assert values["agree"], values["final_states"]
        assert values["final_continue"] == 200
        assert values["kv_cells_used_after"] == 0
        assert values["unexplained_errors"] == [], values["unexplained_errors"]

    def test_soak(self, tmp_path: Path) -> None:
        """A steady rate for SOAK_S: every request exact, engine memory flat, cells freed."""
        figures = Figures(f"soak {SOAK_S} s at {SOAK_RPS:g} requests/s", "llama-cpp")
        with llama_stack(tmp_path) as stack:
            asyncio.run(soak(stack, figures))
            figures.report()
        counts, values = figures.counts["soak"], figures.values
        assert counts[Outcome.OK.value] == values["requests"], figures.render()
        assert values["engine_rss_growth_pct"] < MAX_ENGINE_RSS_GROWTH * 100
        assert values["kv_cells_used_after"] == 0
        assert values["restarts"] == 0


async def storm_client(
    stack: FaultStack, rng: random.Random, count: int, statuses: Counter[str], modes: Counter[str]
) -> None:
    async with stack.async_admin(timeout=30.0) as admin:
        for _ in range(count):
            if rng.random() < 0.5:
                mode = rng.choice(["in_place", "retract", "abort"])
                modes[mode] += 1
                answer = await admin.post("/api/pause", json={"mode": mode, "timeout_s": 5})
            else:
                answer = await admin.post("/api/continue", json={"timeout_s": 5})
            statuses[str(answer.status_code)] += 1
            await asyncio.sleep(rng.uniform(0.0, 0.05))


async def storm_under_load(stack: FaultStack, figures: Figures) -> None:
    plan = llama_plan("llama-storm")
    statuses: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    rng = random.Random(20261206)
    async with Load(stack.base_url, plan, label="llama-storm", model=stack.model) as load:
        load.closed(16)
        await load.wait_for(lambda: len(load.ended()) >= 16, 60.0, "16 warm-up requests")
        started = time.monotonic()
        share = STORM_OPERATIONS // STORM_CLIENTS
        await asyncio.gather(
            *(
                storm_client(stack, random.Random(rng.random()), share, statuses, modes)
                for _ in range(STORM_CLIENTS)
            )
        )
        figures.set("storm_s", time.monotonic() - started)
        await settle(stack, figures)
        async with stack.async_admin(timeout=30.0) as admin:
            final = await admin.post("/api/continue", json={"timeout_s": 10})
        figures.set("final_continue", final.status_code)
        after = load.issued
        await load.wait_for(
            lambda: load.count(Outcome.OK, lambda r: r.number >= after) >= 16,
            60.0,
            "16 exact requests after the storm",
        )
    figures.outcomes(load.records)
    figures.failures(load.records)
    figures.set("operations", sum(statuses.values()))
    figures.set("statuses", dict(sorted(statuses.items())))
    figures.set("pause_modes", dict(sorted(modes.items())))
    # A clear error here must be an abort: the only fault is the operator's abort pauses.
    figures.set(
        "unexplained_errors",
        [
            r.describe()
            for r in load.records
            if r.outcome is Outcome.CLEAR_ERROR
            and r.verdict is not None
            and "abort" not in r.verdict.cause.lower()
        ][:5],
    )
    await kv_freed(stack, figures)


async def soak(stack: FaultStack, figures: Figures) -> None:
    plan = llama_plan("llama-soak")
    engine_before = stack.pid("engine")
    async with Load(stack.base_url, plan, label="llama-soak-warm", model=stack.model) as warm:
        warm.open(SOAK_RPS)
        await asyncio.sleep(10.0)
    rss_before = rss_total([engine_before])
    async with Load(stack.base_url, plan, label="llama-soak", model=stack.model) as load:
        load.open(SOAK_RPS)
        await asyncio.sleep(SOAK_S)
    rss_after = rss_total([stack.pid("engine")])
    figures.outcomes(warm.records, "warm-up")
    figures.outcomes(load.records, "soak")
    figures.failures([*warm.records, *load.records])
    figures.set("soak_s", SOAK_S)
    figures.set("requests", len(load.records))
    figures.set("engine_rss_before_mib", rss_before / 2**20)
    figures.set("engine_rss_after_mib", rss_after / 2**20)
    figures.set("engine_rss_growth_pct", 100 * (rss_after - rss_before) / rss_before)
    figures.set("restarts", int(stack.pid("engine") != engine_before))
    await kv_freed(stack, figures)
