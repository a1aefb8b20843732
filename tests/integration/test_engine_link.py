"""The docs/engine.md example engine (examples/echo_engine.py) as its own process, against
real ``switchboard router`` and ``switchboard detok-router`` processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zmq

from router_core.endpoints import worker_address
from router_core.wire import Kind, combine_rows, decode_message, frame_message
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import EmbeddingRequest, GenerateRequest, SamplingParams
from tests.integration.harness import REPO_ROOT, SocketFactory, Stack, wait_until

pytestmark = pytest.mark.integration

ECHO = REPO_ROOT / "examples" / "echo_engine.py"


class Detokenizer:
    """A test-owned PULL at a detokenizer endpoint, collecting decoded messages."""

    def __init__(self, sock: zmq.Socket[bytes]) -> None:
        self.sock = sock
        self.rows: dict[str, list[Any]] = {}
        self.kinds: list[Kind] = []

    def take(self) -> None:
        """Decode everything waiting (each message must be valid)."""
        while self.sock.poll(0, zmq.POLLIN):
            header, payloads = decode_message(self.sock.recv_multipart())
            self.kinds.append(header.kind)
            for rid, row in zip(header.rids, payloads, strict=False):
                self.rows.setdefault(rid, []).append(row)

    def finished(self, rid: str) -> bool:
        self.take()
        rows = self.rows.get(rid, [])
        return bool(rows) and rows[-1].finished_reasons[0] is not None


def generate(rid: str, owner: str, ids: list[int], max_new: int) -> list[bytes]:
    request = GenerateRequest(
        rid=rid, input_ids=ids, sampling_params=SamplingParams(max_new_tokens=max_new)
    )
    return frame_message(Kind.GENERATE, request, rids=[rid], reply_to=[owner])


def ctl_load(switchboard_bin: str, run_dir: Path) -> dict[str, Any]:
    """The latest load snapshot of the router in ``run_dir``, as ``switchboard ctl ...
    load`` prints it."""
    done = subprocess.run(
        [switchboard_bin, "ctl", "--run-dir", str(run_dir), "--timeout", "5", "load"],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


class TestEchoEngine:
    def test_worker_requests_are_answered_through_the_router(
        self, stack: Stack, switchboard_bin: str
    ) -> None:
        """A stand-in worker's 20 requests each finish exactly once, rows delivered by the
        router's ``outputs`` as TOKEN_BATCH; ``switchboard ctl load`` shows the
        engine's snapshots; nothing is rejected or dropped anywhere."""
        router = stack.start_router()
        engine = stack.start_example_engine(
            ECHO, "--outputs-via", "router", "--load-interval", "0.1", wait_live=router
        )
        worker = stack.start_worker("w0", "--requests", "20")
        report = worker.wait_for(lambda r: r["finished"] == 20, 15.0, "20 requests finished")
        assert report["duplicate_finishes"] == 0 and report["misdelivered"] == 0
        assert report["bad_rows"] == 0 and report["bad_messages"] == 0
        assert report["inflight"] == 0 and set(report["rows_by_rid"]) == {
            f"w0-req-{i}" for i in range(20)
        }
        assert report["messages_by_kind"]["TOKEN_BATCH"] >= 1

        def idle_load() -> dict[str, Any] | None:
            snapshot = ctl_load(switchboard_bin, stack.run_dir)
            return snapshot if snapshot["running"] == 0 and snapshot["step"] >= 1 else None

        load = wait_until(idle_load, 10.0, "an idle load snapshot after the work")
        assert load["max_running"] == 256 and load["age_s"] < 5.0
        assert worker.report()["loads_received"] >= 1
        counters = router.ctl("status")["counters"]
        assert counters["forwarded"]["generate"] == 20
        assert counters["routed_rows"]["token_batch"] == report["rows"]
        assert "rejected" not in counters and "dropped" not in counters
        engine.assert_running()

    def test_tokens_and_freeze_gc_through_the_detokenizer_router(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """Through the detokenizer router, each GENERATE gets one row per step echoing its
        prompt (up to --tokens, or max_new_tokens), the last one finished; an EMBED gets
        its embedding; freeze-GC from the router reaches the detokenizer."""
        router = stack.start_router()
        detok = stack.start_detok_router(1)
        detokenizer = Detokenizer(sockets.bound(zmq.PULL, detok.endpoints.detokenizers[0]))
        stack.start_example_engine(ECHO, "--tokens", "3", wait_live=router)
        owner = worker_address(stack.run_dir, "raw")
        requests = sockets.connected(zmq.PUSH, router.endpoints.requests)
        requests.send_multipart(generate("long", owner, [11, 12], 16))
        requests.send_multipart(generate("short", owner, [7], 2))
        embed = EmbeddingRequest(rid="emb", input_ids=[1, 2])
        requests.send_multipart(frame_message(Kind.EMBED, embed, rids=["emb"], reply_to=[owner]))
        for rid in ("long", "short", "emb"):
            wait_until(lambda rid=rid: detokenizer.finished(rid), 10.0, f"{rid} finished")

        long_rows = detokenizer.rows["long"]
        assert [row.output_ids for row in long_rows] == [[[11]], [[12]], [[11]]]  # new ids only
        assert [row.completion_tokens for row in long_rows] == [[1], [2], [3]]
        assert [row.finished_reasons for row in long_rows] == [
            [None],
            [None],
            [{"type": "length", "length": 3}],
        ]
        short = combine_rows(BatchTokenIDOutput, detokenizer.rows["short"])
        assert short.output_ids == [[7], [7]] and short.prompt_tokens == [1, 1]
        assert short.http_worker_ipcs == [owner, owner]
        (embedding,) = detokenizer.rows["emb"]
        assert isinstance(embedding, BatchEmbeddingOutput)
        assert embedding.embeddings == [[1.0, 2.0]]
        assert Kind.EMBEDDING_BATCH in detokenizer.kinds

        assert router.ctl("freeze_gc")["forwarded_to"] == ["engine"]

        def freeze_arrived() -> bool:
            detokenizer.take()
            return Kind.FREEZE_GC in detokenizer.kinds

        wait_until(freeze_arrived, 10.0, "FREEZE_GC at the detokenizer")
        counters = detok.ctl("status")["counters"]
        assert counters["broadcast"] == {"freeze_gc": 1}
        assert "rejected" not in counters and "dropped" not in counters

    def test_pause_and_continue_are_applied_and_acknowledged(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """The engine acknowledges every pause and continue (acked names it with the
        worker); paused in place it admits but does not step a request, an abort-mode
        pause then finishes it with an abort row, and after continue requests run again."""
        router = stack.start_router("--barrier-timeout", "5")
        detok = stack.start_detok_router(1)
        detokenizer = Detokenizer(sockets.bound(zmq.PULL, detok.endpoints.detokenizers[0]))
        stack.start_example_engine(ECHO, "--load-interval", "0.05", wait_live=router)
        stack.start_worker("w0")
        owner = worker_address(stack.run_dir, "raw")
        requests = sockets.connected(zmq.PUSH, router.endpoints.requests)

        paused = router.ctl("pause", mode="in_place")
        assert paused["complete"] and paused["acked"] == ["engine", "w0"]
        requests.send_multipart(generate("held", owner, [5, 6], 4))
        wait_until(lambda: (router.ctl("load") or {}).get("running") == 1, 10.0, "held admitted")
        detokenizer.take()
        assert detokenizer.rows == {}, "a paused engine stepped"

        aborted = router.ctl("pause", mode="abort")
        assert aborted["complete"] and aborted["acked"] == ["engine", "w0"]
        wait_until(lambda: detokenizer.finished("held"), 10.0, "held aborted")
        (row,) = detokenizer.rows["held"]
        assert row.finished_reasons == [{"type": "abort", "message": "paused"}]
        assert row.completion_tokens == [0]

        resumed = router.ctl("continue")
        assert resumed["complete"] and resumed["acked"] == ["engine", "w0"]
        requests.send_multipart(generate("after", owner, [9], 2))
        wait_until(lambda: detokenizer.finished("after"), 10.0, "after finished")
        assert [r.output_ids for r in detokenizer.rows["after"]] == [[[9]], [[9]]]
        assert router.ctl("status")["counters"]["acks"]["pending"] == 6

    def test_example_stops_cleanly_on_sigterm(self, stack: Stack, run_dir: Path) -> None:
        """SIGTERM stops the example with status 0 and its socket file removed."""
        router = stack.start_router()
        engine = stack.start_example_engine(ECHO, wait_live=router)
        assert engine.terminate(timeout=5.0) == 0
        assert not (run_dir / "engine").exists()
