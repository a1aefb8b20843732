"""Where each party of a stack stands on the pause, and whether they agree.

The router (through the admin API's ``/api/status``), every worker (its own
``/get_server_info``) and the engine (which steps only when not paused:
:mod:`tests.fault.harness.engine_probe`) each say whether they are paused, and the
router and workers in which mode. After a fault they must agree again, within a bound
(:func:`settle`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import zmq

from tests.fault.harness.engine_probe import engine_steps
from tests.fault.harness.figures import Figures
from tests.fault.harness.stack import FaultStack
from tests.fault.harness.worker_status import every_worker_status
from tests.support.zmq_context import bounded_context

__all__ = ["SETTLE_S", "agree", "pause_states", "settle"]

#: How long a stack has after a fault to agree on one pause state.
SETTLE_S = 15.0


async def pause_states(
    stack: FaultStack, context: zmq.Context[zmq.Socket[bytes]]
) -> dict[str, Any]:
    """Where each party stands: the router's and each worker's (paused, mode), the engine's
    paused (not stepping)."""
    async with stack.async_admin() as admin:
        status = (await admin.get("/api/status")).json()
    ids = {role.removeprefix("worker-") for role in stack.workers()}
    workers = await every_worker_status(stack.base_url, ids)
    states: dict[str, Any] = {"router": (status["paused"], status["pause_mode"])}
    for worker_id, info in sorted(workers.items()):
        states[worker_id] = (info["worker"]["paused"], info["worker"]["pause_mode"])
    stepping = await asyncio.to_thread(engine_steps, context, stack.run_dir)
    states["engine"] = (not stepping, None)
    return states


def agree(states: dict[str, Any]) -> bool:
    """Everyone paused or everyone not; the workers in the router's mode."""
    paused, mode = states["router"]
    return all(
        party_paused == paused and (name == "engine" or not paused or party_mode == mode)
        for name, (party_paused, party_mode) in states.items()
    )


async def settle(stack: FaultStack, figures: Figures, within_s: float = SETTLE_S) -> bool:
    """Wait (bounded by ``within_s``) until every party is in one pause state; set the
    figures ``final_states`` and ``agree``, and return whether they agreed."""
    with bounded_context() as context:
        deadline = time.monotonic() + within_s
        states = await pause_states(stack, context)
        while not agree(states) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            states = await pause_states(stack, context)
    figures.set("final_states", {name: list(state) for name, state in states.items()})
    figures.set("agree", agree(states))
    return agree(states)
