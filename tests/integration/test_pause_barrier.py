"""The pause/continue barrier across real processes: completion, stragglers, concurrency,
replaced participants, late joiners."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from typing import Any

import msgspec
import pytest
import zmq
import zmq.asyncio

from router_core.control import AsyncControlClient, ControlRequest
from router_core.control.commands import TOKENIZER_ROUTER_COMMANDS
from router_core.control.protocol import decode_reply, encode
from router_core.wire import Kind, decode_header, frame_message
from router_core.wire.control import WorkerRegistration
from tests.integration.harness import SocketFactory, Stack, StandInHandle, wait_until
from tests.support.zmq_context import bounded_context

pytestmark = pytest.mark.integration

WORKERS = ["w0", "w1", "w2", "w3"]


#: For tests that expect every operation to complete: a scheduling hiccup on a busy
#: machine must not turn into a barrier timeout. Only the straggler test needs 1 s.
PATIENT = ("--barrier-timeout", "5")


def start_four(stack: Stack, *router_args: str) -> tuple[Any, list[StandInHandle], StandInHandle]:
    """A router, four stand-in workers and a stand-in engine the router sees live."""
    router = stack.start_router(*router_args)
    workers = [stack.start_worker(w) for w in WORKERS]
    engine = stack.start_engine(wait_live=router)
    return router, workers, engine


def states(router: Any) -> dict[str, str]:
    return {view["id"]: view["state"] for view in router.ctl("list_workers")}


class TestBarrier:
    def test_pause_completes_when_all_four_workers_and_the_engine_ack(self, stack: Stack) -> None:
        """Pause answers complete with all 4 workers and the engine acknowledged, each of
        them paused by its own account, though none has served a request; continue then
        resumes all of them."""
        router, workers, engine = start_four(stack, *PATIENT)
        assert all(w.report()["requests_sent"] == 0 for w in workers)
        outcome = router.ctl("pause", mode="retract")
        assert outcome["complete"] is True
        assert outcome["acked"] == sorted([*WORKERS, "engine"])
        assert outcome["stragglers"] == [] and outcome["departed"] == []
        assert outcome["action"] == "pause" and outcome["mode"] == "retract"
        for worker in workers:
            report = worker.wait_for(lambda r: r["paused"], 2.0, "paused")
            assert report["last_op_id"] == outcome["op_id"]
            assert report["pause_mode"] == "retract"
        assert (
            engine.wait_for(lambda r: r["paused"], 2.0, "engine paused")["pause_mode"] == "retract"
        )
        wait_until(lambda: set(states(router).values()) == {"paused"}, 3.0, "all paused")

        resumed = router.ctl("continue")
        assert resumed["complete"] is True and resumed["seq"] == outcome["seq"] + 1
        assert resumed["acked"] == sorted([*WORKERS, "engine"])
        for worker in workers:
            worker.wait_for(lambda r: r["state"] == "serving" and not r["paused"], 2.0, "serving")
        engine.wait_for(lambda r: not r["paused"], 2.0, "engine resumed")
        wait_until(lambda: set(states(router).values()) == {"serving"}, 3.0, "all serving")
        status = router.ctl("status")
        assert status["paused"] is False and status["pending_operations"] == 0

    def test_a_stopped_worker_is_named_as_the_straggler_at_the_timeout(self, stack: Stack) -> None:
        """With one worker SIGSTOPped, pause answers at the barrier timeout (1 s) with
        complete=False and exactly that worker as straggler; the others acked."""
        # A heartbeat timeout well past the barrier's, so the stopped worker is still
        # registered (not departed) when the barrier gives up on it.
        router, workers, _ = start_four(stack, "--heartbeat-timeout", "3")
        frozen = workers[2]
        frozen.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            outcome = router.ctl("pause", mode="in_place")
            elapsed = time.monotonic() - started
        finally:
            frozen.process.send_signal(signal.SIGCONT)
        assert outcome["complete"] is False
        assert outcome["stragglers"] == ["w2"]
        assert outcome["acked"] == sorted(["w0", "w1", "w3", "engine"])
        assert 0.9 <= elapsed < 2.0, f"answered after {elapsed:.2f}s, barrier timeout is 1 s"
        assert router.ctl("status")["counters"]["pause_timeouts"] == {"pause": 1}
        # Resumed, the worker applies the broadcast it missed (or re-registers paused).
        frozen.wait_for(lambda r: r["paused"], 5.0, "paused after SIGCONT")

    def test_concurrent_pause_and_continue_leave_the_state_of_the_highest_seq(
        self, stack: Stack
    ) -> None:
        """100 concurrent pause/continue calls all get an answer with a distinct seq, and
        every worker, the engine and the router end in the state of the highest seq."""
        router, workers, engine = start_four(stack, *PATIENT)
        rng = random.Random(1234)
        calls: list[tuple[str, dict[str, Any]]] = []
        for _ in range(100):
            if rng.random() < 0.5:
                calls.append(("continue", {}))
            else:
                calls.append(("pause", {"mode": rng.choice(["abort", "retract", "in_place"])}))

        async def run_all() -> list[Any]:
            with bounded_context(zmq.asyncio.Context) as context:
                async with AsyncControlClient(
                    router.endpoints.control, timeout_s=20.0, context=context, key=stack.key
                ) as client:
                    replies = await asyncio.gather(
                        *(
                            client.request(
                                TOKENIZER_ROUTER_COMMANDS[command],
                                msgspec.convert(args, TOKENIZER_ROUTER_COMMANDS[command].args_type),
                            )
                            for command, args in calls
                        )
                    )
                    return [msgspec.to_builtins(reply) for reply in replies]

        outcomes = asyncio.run(run_all())
        seqs = [o["seq"] for o in outcomes]
        assert len(set(seqs)) == 100
        for (command, args), outcome in zip(calls, outcomes, strict=True):
            assert outcome["action"] == command
            assert outcome["mode"] == args.get("mode")
        last = max(outcomes, key=lambda o: o["seq"])
        incomplete = [o for o in outcomes if not o["complete"]]
        assert not incomplete, f"{len(incomplete)} operations timed out: {incomplete[:3]}"
        paused = last["action"] == "pause"

        for worker in workers:
            report = worker.wait_for(
                lambda r: r["last_op_id"] == last["op_id"], 5.0, "the last operation"
            )
            assert report["paused"] is paused
            assert report["pause_mode"] == last["mode"]
            assert report["ops_received"] == 100 and report["acks_sent"] == 100
            assert report["ops_out_of_order"] == 0
        report = engine.wait_for(lambda r: r["last_op_id"] == last["op_id"], 5.0, "last op")
        assert report["paused"] is paused
        assert report["received"].get("PAUSE", 0) + report["received"].get("CONTINUE", 0) == 100
        status = router.ctl("status")
        assert status["last_op_seq"] == last["seq"] and status["last_op_id"] == last["op_id"]
        assert status["paused"] is paused and status["pending_operations"] == 0
        expected = "paused" if paused else "serving"
        wait_until(lambda: set(states(router).values()) == {expected}, 3.0, f"all {expected}")

    def test_a_participant_replaced_at_its_address_departs_the_barrier(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """A worker that never acknowledges and whose address is taken over by a new worker
        id mid-operation leaves the operation as departed: the pause completes at once
        instead of waiting for the deadline."""
        router = stack.start_router(*PATIENT)
        stack.start_worker("w0")
        stack.start_engine(wait_live=router)
        address = f"ipc://{stack.run_dir}/worker-mute"
        inbox = sockets.bound(zmq.PULL, address)
        push = sockets.connected(zmq.PUSH, router.endpoints.workers)
        mute = WorkerRegistration("mute", address, key=stack.key)
        push.send_multipart(frame_message(Kind.REGISTER, mute))
        assert decode_header(inbox.recv_multipart()[0]).kind is Kind.REGISTER_REPLY
        dealer = sockets.connected(zmq.DEALER, router.endpoints.control)
        started = time.monotonic()
        pause = ControlRequest(id=1, command="pause", args={"mode": "abort"}, key=stack.key)
        dealer.send(encode(pause))
        wait_until(lambda: router.ctl("status")["pending_operations"] == 1, 3.0, "pause pending")
        heir = WorkerRegistration("heir", address, key=stack.key)
        push.send_multipart(frame_message(Kind.REGISTER, heir))
        reply = decode_reply(dealer.recv())
        elapsed = time.monotonic() - started
        assert reply.ok, reply
        outcome = reply.result
        assert outcome["complete"] is True
        assert outcome["departed"] == ["mute"]
        assert outcome["acked"] == ["engine", "w0"]
        assert elapsed < 3.0, f"answered after {elapsed:.2f}s, not at the 5 s deadline"
        assert sorted(v["id"] for v in router.ctl("list_workers")) == ["heir", "w0"]

    def test_a_worker_registering_while_paused_starts_paused(self, stack: Stack) -> None:
        """A worker that registers after a pause is told so in its RegistrationReply (with
        the pause's op id) and starts paused; continue then includes it and resumes it."""
        router, workers, _ = start_four(stack, *PATIENT)
        outcome = router.ctl("pause", mode="abort")
        assert outcome["complete"] is True
        late = stack.start_worker("late")
        report = late.wait_for(lambda r: r["state"] == "paused", 3.0, "paused")
        assert report["reg_paused"] is True and report["reg_op_id"] == outcome["op_id"]
        assert report["pause_mode"] == "abort" and report["ops_received"] == 0
        wait_until(lambda: states(router).get("late") == "paused", 3.0, "late listed as paused")

        resumed = router.ctl("continue")
        assert resumed["complete"] is True
        assert "late" in resumed["acked"]
        for worker in [*workers, late]:
            worker.wait_for(lambda r: r["state"] == "serving", 3.0, "serving")
        wait_until(lambda: set(states(router).values()) == {"serving"}, 3.0, "all serving")
