"""The routers' ``metrics`` command on real router processes: what they moved, per worker
and route, hop latency, split sizes, the registry and the pause barrier."""

from __future__ import annotations

import time
from typing import Any

import pytest
import zmq

from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.wire import frame_batch
from router_core.wire.outputs import BatchTokenIDOutput
from tests.integration.harness import SocketFactory, Stack, wait_until

pytestmark = pytest.mark.integration

REQUESTS = 25


def traffic(snapshot: dict[str, Any], route: str) -> dict[str, tuple[int, int]]:
    """``{worker: (messages, bytes)}`` of one route."""
    return {
        row["worker"]: (row["messages"], row["bytes"])
        for row in snapshot["traffic"]
        if row["route"] == route
    }


def bucket_count(histogram: dict[str, Any]) -> int:
    """The ``+Inf`` bucket, which must equal the count."""
    last_bound, last_count = histogram["buckets"][-1]
    assert last_bound == "+Inf" and last_count == histogram["count"]
    return int(last_count)


class TestTokenizerRouterMetrics:
    def test_forward_control_broadcast_and_the_barrier_are_counted(self, stack: Stack) -> None:
        """Requests of two workers are counted per worker (messages, bytes, hop latency,
        through the C fast path or not), control and broadcast traffic per worker, and one
        pause/continue as finished operations with barrier times; every worker state is
        reported and the engine is up."""
        router = stack.start_router()
        stack.start_engine("--answer-generate", wait_live=router)
        for worker_id in ("w0", "w1"):
            stack.start_worker(worker_id, "--requests", str(REQUESTS))

        def forwarded() -> bool:
            counts = traffic(router.ctl("metrics"), "forward")
            return all(counts.get(w, (0, 0))[0] == REQUESTS for w in ("w0", "w1"))

        wait_until(forwarded, 15.0, "every request counted as forwarded")
        router.ctl("pause", mode="in_place")
        router.ctl("continue")
        snapshot = router.ctl("metrics")

        assert snapshot["process"] == "tokenizer_router"
        forward = traffic(snapshot, "forward")
        assert set(forward) == {"w0", "w1"}
        for messages, nbytes in forward.values():
            assert messages == REQUESTS and nbytes > 40 * REQUESTS
        hop = snapshot["histograms"]["hop_latency_seconds"]["forward"]
        assert bucket_count(hop) == 2 * REQUESTS
        assert 0 < hop["sum"] < 2 * REQUESTS * 1.0, "each hop well under a second here"
        control = traffic(snapshot, "control")
        broadcast = traffic(snapshot, "broadcast")
        for worker_id in ("w0", "w1"):
            assert control[worker_id][0] >= 3, "a registration, its reply and acks at least"
            assert broadcast[worker_id][0] >= 2, "the pause and the continue at least"
        operations = {
            (op["operation"], op["mode"], op["result"]): op["count"]
            for op in snapshot["pause_operations"]
        }
        assert operations == {
            ("pause", "in_place", "complete"): 1,
            ("continue", "none", "complete"): 1,
        }
        barrier = snapshot["histograms"]["pause_barrier_seconds"]
        assert bucket_count(barrier["pause"]) == 1 and bucket_count(barrier["continue"]) == 1
        assert snapshot["paused"] is False
        assert snapshot["pause_state_since_unix_s"] <= time.time()
        assert snapshot["workers_by_state"] == {
            "starting": 0,
            "serving": 2,
            "paused": 0,
            "draining": 0,
            "drained": 0,
            "unresponsive": 0,
            "dead": 0,
        }
        rows = {row["worker"]: row for row in snapshot["workers"]}
        assert {row["up"] for row in rows.values()} == {1}
        assert all(row["address"].startswith("ipc://") for row in rows.values())
        assert all(abs(row["last_heartbeat_unix_s"] - time.time()) < 5 for row in rows.values())
        assert snapshot["engine"]["up"] is True
        # A polling control call can outlive its deadline on a loaded machine (counted as
        # control_expired); no request or worker message may be rejected.
        assert set(snapshot["rejected"]) <= {"control_expired"}
        assert snapshot["backlog_messages"] == 0

    def test_a_departed_worker_is_reported_down(self, stack: Stack) -> None:
        """A worker that deregistered is listed as dead with up 0, next to a live one."""
        router = stack.start_router()
        stack.start_worker("w0")
        leaving = stack.start_worker("w1")
        leaving.process.terminate()
        wait_until(
            lambda: router.ctl("metrics")["workers_by_state"]["dead"] == 1,
            10.0,
            "w1 reported dead",
        )
        rows = {row["worker"]: row for row in router.ctl("metrics")["workers"]}
        assert rows["w0"]["up"] == 1 and rows["w0"]["state"] == "serving"
        assert rows["w1"]["up"] == 0 and rows["w1"]["state"] == "dead"


class TestDetokenizerRouterMetrics:
    def test_rows_are_counted_per_owner_with_split_sizes(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Each batch's rows are counted per owning worker address on route detokenize
        (one message per owner per batch, the owner's row bytes), with the batch size and
        the engine-to-router latency observed once per batch."""
        endpoints = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 2)
        inboxes = [sockets.bound(zmq.PULL, ep) for ep in endpoints.detokenizers]
        detok = stack.start_detok_router(2)
        owners = [f"ipc://{stack.run_dir}/worker-m{i}" for i in range(2)]
        inbound = sockets.connected(zmq.PUSH, endpoints.inbound)
        batches = 10
        for b in range(batches):
            batch = BatchTokenIDOutput(
                rids=[f"r{b}-{j}" for j in range(3)],
                http_worker_ipcs=[owners[0], owners[1], owners[0]],
                output_ids=[[b, j] for j in range(3)],
            )
            inbound.send_multipart(frame_batch(batch))
        received = [0]

        def all_rows_arrived() -> bool:
            for sock in inboxes:
                while sock.poll(0):
                    received[0] += len(sock.recv_multipart()) - 1
            return received[0] == 3 * batches

        wait_until(all_rows_arrived, 10.0, "every row at a detokenizer", interval=0.005)
        snapshot = detok.ctl("metrics")
        assert snapshot["process"] == "detokenizer_router"
        counted = traffic(snapshot, "detokenize")
        assert set(counted) == set(owners)
        assert counted[owners[0]][0] == batches and counted[owners[1]][0] == batches
        assert counted[owners[0]][1] > counted[owners[1]][1] > 0, "two rows weigh more than one"
        split = snapshot["histograms"]["split_batch_rows"]["detokenize"]
        assert bucket_count(split) == batches and split["sum"] == 3 * batches
        assert bucket_count(snapshot["histograms"]["hop_latency_seconds"]["detokenize"]) == batches
        assert snapshot["dropped"] == {} and snapshot["rejected"] == {}
