"""Garbage into every socket every process of a running stack binds: no crash, all counted.

At least 100,000 frames of random and mutated messages (``harness/fuzz.py``) go to
each of the 12 sockets a two-worker, two-detokenizer stack binds: the tokenizer
router's five sockets, the detokenizer router's two, each detokenizer, the engine
link's PULL and each worker link's PULL, all at once, while streaming requests run.
What must hold: every pid is unchanged (no process crashed or was restarted), every
message is counted in ``switchboard_rejected_frames_total`` under the process and the
reason the stack's own validation gives it (exactly: no more, no fewer), every control
request is answered with an error (an expired one with nothing), and every streaming
request sent meanwhile is exact. ``make soak`` sends 1,000,000 frames to each socket.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
import zmq

from tests.fault.harness.classify import Outcome
from tests.fault.harness.expected import RequestPlan
from tests.fault.harness.figures import Figures
from tests.fault.harness.fuzz_send import Attacker
from tests.fault.harness.fuzz_targets import stack_targets
from tests.fault.harness.load import Load
from tests.fault.harness.metrics import scrape_dropped, scrape_rejected
from tests.fault.harness.modes import scaled
from tests.fault.harness.recovery import poll
from tests.fault.harness.stack import FaultStack, StackConfig, fault_stack
from tests.integration.harness.polling import ipc_path, socket_files
from tests.support.zmq_context import bounded_context

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(600)]

#: Frames of whole messages into each bound socket.
FRAMES_PER_SOCKET = scaled(100_000, 1_000_000)
#: Streaming requests sent while the garbage flows, all of which must be exact.
LIVE_REQUESTS = 100
#: The workers, the engine and the detokenizers export their counts about once a second.
COUNTED_S = 60.0


async def attack_while_serving(stack: FaultStack, figures: Figures) -> None:
    worker_ids = [role.removeprefix("worker-") for role in stack.workers()]
    targets = stack_targets(stack.run_dir, sorted(worker_ids), stack.config.detokenizers)
    bound = {path.name for path in socket_files(stack.run_dir)}
    attacked = {ipc_path(target.endpoint).name for target in targets}
    assert bound == attacked, f"bound but not attacked: {bound - attacked}"
    plan = RequestPlan.build("fuzz")
    context: zmq.Context[zmq.Socket[bytes]]
    async with stack.async_admin(timeout=30.0) as admin:
        before = await scrape_rejected(admin)
        with bounded_context() as context, Attacker(context, targets, timeout_s=30.0) as attacker:
            async with Load(stack.base_url, plan, label="fuzz") as load:
                load.closed(8)
                started = time.monotonic()
                await asyncio.to_thread(attacker.send, FRAMES_PER_SOCKET, 20261201)
                send_s = time.monotonic() - started
                await load.wait_for(lambda: load.issued >= LIVE_REQUESTS, 60.0, "live requests")
            expected = before + attacker.sent
            seen: Counter[tuple[str, str]] = Counter()

            async def counted() -> bool:
                seen.clear()
                seen.update(await scrape_rejected(admin))
                return seen.total() >= expected.total()

            try:
                await poll(counted, COUNTED_S, "every message counted")
            except AssertionError as exc:
                figures.note(str(exc))
            try:
                await poll(lambda: asyncio.to_thread(attacker.read_replies), 20.0, "replies")
            except AssertionError as exc:
                # Say which socket fell short, and whether its process counted a drop.
                dropped = await scrape_dropped(admin)
                raise AssertionError(
                    f"{exc}: read {dict(attacker.replies)} of {dict(attacker.replies_due)} due;"
                    f" dropped as counted by the stack: {dropped}"
                ) from None
    figures.outcomes(load.records)
    figures.set("messages", attacker.sent.total())
    figures.set("frames", attacker.frames_by_target.total())
    figures.set("fewest_frames_into_one_socket", min(attacker.frames_by_target.values()))
    figures.set("sockets", len(targets))
    figures.set("send_s", send_s)
    figures.set("messages_per_s", round(attacker.sent.total() / send_s))
    by_process: Counter[str] = Counter()
    for (process, _reason), count in attacker.sent.items():
        by_process[process] += count
    figures.set("sent_by_process", dict(by_process))
    delta = seen - before
    figures.set("counted", delta.total())
    mismatched = {
        f"{process}/{reason}": (attacker.sent[(process, reason)], delta[(process, reason)])
        for process, reason in set(attacker.sent) | set(delta)
        if attacker.sent[(process, reason)] != delta[(process, reason)]
    }
    figures.set("sent_vs_counted_mismatches", mismatched)
    figures.set("control_replies", dict(attacker.replies))
    figures.set("control_error_replies", dict(attacker.error_replies))
    figures.set("control_replies_due", dict(attacker.replies_due))
    figures.failures(load.records)


class TestFuzzSockets:
    def test_garbage_into_every_bound_socket(self, tmp_path: Path) -> None:
        """100,000 frames of bad messages into each of 12 bound sockets under load: pids
        unchanged, each message counted by process and reason, live requests exact."""
        figures = Figures("bad input: ZeroMQ frames into every bound socket")
        with fault_stack(tmp_path, StackConfig(workers=2, detokenizers=2)) as stack:
            pids_before = stack.roles()
            asyncio.run(attack_while_serving(stack, figures))
            pids_after = stack.roles()
            figures.set("pids_unchanged", pids_before == pids_after)
            restarts = stack.log().count("exited unexpectedly")
            figures.set("restarts", restarts)
            figures.report()
            assert pids_after == pids_before
            assert restarts == 0
            assert figures.values["fewest_frames_into_one_socket"] >= FRAMES_PER_SOCKET
            assert figures.values["sent_vs_counted_mismatches"] == {}
            assert figures.values["control_error_replies"] == figures.values["control_replies_due"]
            live = figures.counts["all"]
            assert live[Outcome.OK.value] == sum(live.values()), "live requests not all exact"
