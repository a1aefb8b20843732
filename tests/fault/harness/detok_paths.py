"""Which workers each detokenizer serves, learned the way the detokenizer router assigns them.

The detokenizer router (sticky key ``worker``, the default) gives each worker, when it
first sees one of its rows, the detokenizer with the fewest workers so far (ties: the
lowest index), and keeps it there (``router_core/detokenizer_router/picker.py``). So on
a fresh stack, requests sent one at a time until every worker has served one reveal the
assignment: the k-th worker to serve gets detokenizer ``k mod M``. The detokenizer
router's own ``workers_per_detokenizer`` is checked against it.
"""

from __future__ import annotations

import zmq

from router_core.control import ControlClient
from router_core.control.commands import DETOK_STATUS
from router_core.credentials import KEY_FILE, read_key
from tests.fault.harness.attribution import ConnectionCensus
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.load import Load
from tests.fault.harness.stack import FaultStack
from tests.support.zmq_context import bounded_context

__all__ = ["assign_detokenizers"]

#: One-at-a-time requests allowed for every worker to be seen.
_ATTEMPTS = 200


async def assign_detokenizers(stack: FaultStack, label: str) -> dict[str, set[str]]:
    """``detokenizer-<k>`` -> the worker roles it serves, on a stack that has served
    nothing yet."""
    workers = stack.workers()
    count = stack.config.detokenizers
    order: list[str] = []
    census = ConnectionCensus(stack.port, stack.workers)
    plan = RequestPlan.build(f"{label}-assign", size=32, min_tokens=4, max_tokens=8)
    async with Load(stack.base_url, plan, label=f"{label}-assign", census=census) as load:
        for _ in range(_ATTEMPTS):
            record = await load.request()
            assert record.outcome is Outcome.OK, record.describe()
            if record.worker is not None and record.worker not in order:
                order.append(record.worker)
            if len(order) == len(workers):
                break
    assert sorted(order) == sorted(workers), f"workers seen {order}, running {sorted(workers)}"
    served: dict[str, set[str]] = {f"detokenizer-{k}": set() for k in range(count)}
    for position, worker in enumerate(order):
        served[f"detokenizer-{position % count}"].add(worker)
    endpoint = f"ipc://{stack.run_dir}/detok-router-control"
    context: zmq.Context[zmq.Socket[bytes]]
    with bounded_context() as context:
        key = read_key(stack.run_dir / KEY_FILE)
        client = ControlClient(endpoint, timeout_s=5.0, context=context, key=key)
        try:
            status = client.request(DETOK_STATUS)
        finally:
            client.close()
    expected = [len(served[f"detokenizer-{k}"]) for k in range(count)]
    assert status.workers_per_detokenizer == expected, (status.workers_per_detokenizer, order)
    return served
