"""Huge frames into every socket every process of a running stack binds.

Two sizes go to each of the 12 bound sockets of a two-worker, two-detokenizer stack:

* one frame a byte over ``MAX_FRAME_BYTES`` (64 MiB): libzmq drops the sender's
  connection when it reads the frame's length, before allocating it (the sender sees
  the disconnect on its socket monitor);
* one frame just under it, of bytes no MessagePack value starts with: the receiver reads
  it, fails to decode it and counts it under the reason the stack's own validation
  gives (``bad_header``, ``control_request``).

What must hold: every pid is unchanged, each in-limit frame is counted exactly, each
process's resident memory is back within 32 MiB of what it was, and streaming requests
sent afterwards are exact.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from router_core.limits import MAX_FRAME_BYTES
from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.fuzz import Target, control_reason, data_reason
from tests.fault.harness.fuzz_targets import stack_targets
from tests.fault.harness.load import Load
from tests.fault.harness.metrics import scrape_rejected
from tests.fault.harness.recovery import poll
from tests.fault.harness.stack import FaultStack, StackConfig, fault_stack
from tests.support.zmq_context import bounded_context

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(300)]

#: 0xc1 is the one byte MessagePack never uses: no decoder gets past the first byte.
_NEVER_USED = b"\xc1"
#: How much a process's resident memory may stay above its start once the frames are gone.
RSS_SLACK = 32 * 1024 * 1024
LIVE_REQUESTS = 20
COUNTED_S = 60.0
_SEND_TIMEOUT_MS = 30_000


def _socket(context: zmq.Context[zmq.Socket[bytes]], target: Target) -> zmq.Socket[bytes]:
    sock = context.socket(zmq.DEALER if target.control else zmq.PUSH)
    sock.setsockopt(zmq.SNDTIMEO, _SEND_TIMEOUT_MS)
    sock.connect(target.endpoint)
    return sock


def _dropped(context: zmq.Context[zmq.Socket[bytes]], target: Target, frame: bytes) -> bool:
    """Send ``frame`` alone on a fresh socket; whether the receiver then dropped us."""
    sock = _socket(context, target)
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        sock.send(frame, copy=False)
        return bool(monitor.poll(_SEND_TIMEOUT_MS, zmq.POLLIN)) and bool(
            recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
        )
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)


def _rss(pids: dict[str, int]) -> dict[str, int]:
    return {role: psutil.Process(pid).memory_info().rss for role, pid in pids.items()}


async def huge_frames(stack: FaultStack, figures: Figures) -> None:
    worker_ids = sorted(role.removeprefix("worker-") for role in stack.workers())
    targets = stack_targets(stack.run_dir, worker_ids, stack.config.detokenizers)
    over = _NEVER_USED * (MAX_FRAME_BYTES + 1)
    under = _NEVER_USED * (MAX_FRAME_BYTES - 64)
    expected: Counter[tuple[str, str]] = Counter()
    for target in targets:
        reason = (
            control_reason([under]) if target.control else data_reason([under], target.frame_count)
        )
        assert reason is not None
        expected[(target.process, reason)] += 1
    pids = stack.roles()
    rss_before = _rss(pids)
    async with stack.async_admin(timeout=30.0) as admin:
        before = await scrape_rejected(admin)
        context: zmq.Context[zmq.Socket[bytes]]
        with bounded_context() as context:
            started = time.monotonic()
            dropped = {t.name: await asyncio.to_thread(_dropped, context, t, over) for t in targets}
            figures.set("over_limit_send_s", time.monotonic() - started)
            senders = [_socket(context, target) for target in targets]
            try:
                for sock in senders:
                    sock.send(under, copy=False)
                seen: Counter[tuple[str, str]] = Counter()

                async def counted() -> bool:
                    seen.clear()
                    seen.update(await scrape_rejected(admin) - before)
                    return seen.total() >= expected.total()

                await poll(counted, COUNTED_S, "every in-limit huge frame counted")
            finally:
                for sock in senders:
                    sock.close(linger=0)
    figures.set("dropped_over_limit", dropped)
    figures.set("counted", dict(seen))
    figures.set("expected", dict(expected))
    async with Load(stack.base_url, RequestPlan.build("huge"), label="huge") as load:
        load.closed(4)
        await load.wait_for(lambda: load.issued >= LIVE_REQUESTS, 60.0, "live requests")
    figures.outcomes(load.records)
    rss_after = _rss(pids)
    growth = {role: rss_after[role] - rss_before[role] for role in pids}
    figures.set("rss_growth_mib", {role: round(g / 2**20, 1) for role, g in growth.items()})
    figures.set("rss_growth_max_mib", round(max(growth.values()) / 2**20, 1))
    figures.failures(load.records)


class TestHugeFrames:
    def test_huge_frames_into_every_bound_socket(self, tmp_path: Path) -> None:
        """A frame over 64 MiB is refused by the socket and one just under it is a counted
        reject, on all 12 sockets: pids unchanged, memory back, later requests exact."""
        figures = Figures("bad input: huge frames into every bound socket")
        with fault_stack(tmp_path, StackConfig(workers=2, detokenizers=2)) as stack:
            pids_before = stack.roles()
            asyncio.run(huge_frames(stack, figures))
            assert stack.roles() == pids_before
            figures.report()
        values = figures.values
        assert all(values["dropped_over_limit"].values()), values["dropped_over_limit"]
        assert values["counted"] == values["expected"]
        assert values["rss_growth_max_mib"] * 2**20 < RSS_SLACK
        live = figures.counts["all"]
        assert live[Outcome.OK.value] == sum(live.values()), "live requests not all exact"
