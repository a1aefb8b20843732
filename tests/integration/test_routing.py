"""Routing through real router processes: the backward split to workers, and the
detokenizer router's sticky choice and broadcasts."""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from typing import Any

import pytest
import zmq

from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.wire import Kind, decode_header, decode_payload, frame_batch, frame_message
from router_core.wire.control import (
    FreezeGC,
)
from router_core.wire.outputs import (
    BatchEmbeddingOutput,
    BatchOutput,
    BatchStrOutput,
    BatchTokenIDOutput,
)
from tests.integration.harness import SocketFactory, Stack, wait_until

pytestmark = pytest.mark.integration


def recv_all(sock: zmq.Socket[bytes], until: Any, timeout: float) -> list[list[bytes]]:
    """Receive messages from ``sock`` until ``until(messages)`` holds, or fail."""
    messages: list[list[bytes]] = []

    def more() -> bool:
        while sock.poll(0):
            messages.append(sock.recv_multipart())
        return bool(until(messages))

    wait_until(more, timeout, lambda: f"{len(messages)} messages so far", interval=0.005)
    return messages


class TestBackwardSplit:
    def test_batch_rows_of_three_workers_become_one_message_each(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """A batch with interleaved rows of 3 workers reaches each as exactly one message
        holding only its rows, for every batch kind; a row for an unknown worker is
        dropped and counted."""
        router = stack.start_router()
        workers = [stack.start_worker(f"w{i}") for i in range(3)]
        addresses = [w.address for w in workers]
        stranger = f"ipc://{stack.run_dir}/worker-nobody"
        owners = [addresses[i % 3] for i in range(9)] + [stranger]
        outputs = sockets.connected(zmq.PUSH, router.endpoints.outputs)
        batches: dict[str, BatchOutput] = {
            "STR_BATCH": BatchStrOutput(
                rids=[f"s{i}" for i in range(10)],
                http_worker_ipcs=owners,
                output_strs=[f"text{i}" for i in range(10)],
                finished_reasons=[None] * 10,
            ),
            "TOKEN_BATCH": BatchTokenIDOutput(
                rids=[f"t{i}" for i in range(10)],
                http_worker_ipcs=owners,
                output_ids=[[i, i + 1] for i in range(10)],
                read_offsets=list(range(10)),
            ),
            "EMBEDDING_BATCH": BatchEmbeddingOutput(
                rids=[f"e{i}" for i in range(10)],
                http_worker_ipcs=owners,
                embeddings=[[float(i)] * 4 for i in range(10)],
            ),
        }
        for batch in batches.values():
            outputs.send_multipart(frame_batch(batch))

        for index, worker in enumerate(workers):
            report = worker.wait_for(lambda r: r["rows"] >= 9, 10.0, "9 rows")
            mine = {f"{p}{i}" for p in "ste" for i in range(10) if i < 9 and i % 3 == index}
            assert report["rows"] == 9
            assert report["messages_by_kind"].get("STR_BATCH") == 1
            assert report["messages_by_kind"].get("TOKEN_BATCH") == 1
            assert report["messages_by_kind"].get("EMBEDDING_BATCH") == 1
            assert report["output_messages"] == 3
            assert report["rows_by_rid"] == dict.fromkeys(mine, 1)
            assert report["misdelivered"] == 0
            assert report["bad_rows"] == 0
        counters = router.ctl("status")["counters"]
        assert counters["routed_rows"] == {"str_batch": 9, "token_batch": 9, "embedding_batch": 9}
        assert counters["dropped"] == {"unknown_worker": 3}


def sticky_expectations(
    key: str, batches: list[tuple[list[str], list[str]]], count: int
) -> dict[str, int]:
    """The detokenizer index each sticky key must land on: for ``worker``, the least-used
    detokenizer when the worker is first seen; otherwise crc32 of the key, modulo."""
    expected: dict[str, int] = {}
    per_index = [0] * count
    for rids, owners in batches:
        for rid, owner in zip(rids, owners, strict=True):
            if key == "worker":
                if owner not in expected:
                    expected[owner] = per_index.index(min(per_index))
                    per_index[expected[owner]] += 1
                continue
            text = owner if key == "worker-crc32" else rid
            expected[text] = zlib.crc32(text.encode()) % count
    return expected


class TestDetokenizerRouter:
    @pytest.mark.parametrize("sticky_key", ["worker", "worker-crc32", "request"])
    def test_rows_stick_to_one_detokenizer(
        self, stack: Stack, sockets: SocketFactory, sticky_key: str
    ) -> None:
        """With 2 detokenizers, every row goes where the configured sticky key says
        (balanced per worker, crc32 of the worker address, or crc32 of the rid), each
        batch becomes at most one message per detokenizer, and both get work."""
        endpoints = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 2)
        inboxes = [sockets.bound(zmq.PULL, ep) for ep in endpoints.detokenizers]
        detok = stack.start_detok_router(2, "--sticky-key", sticky_key)
        workers = [f"ipc://{stack.run_dir}/worker-d{i}" for i in range(6)]
        rid_pool = [f"req-{i}" for i in range(20)]
        batches = []
        for b in range(40):
            rows = [(rid_pool[(b * 7 + j) % 20], workers[(b + j) % 6]) for j in range(6)]
            batches.append(([r for r, _ in rows], [w for _, w in rows]))
        expected = sticky_expectations(sticky_key, batches, 2)
        assert set(expected.values()) == {0, 1}, "test data must exercise both detokenizers"
        inbound = sockets.connected(zmq.PUSH, endpoints.inbound)
        for b, (rids, owners) in enumerate(batches):
            batch = BatchTokenIDOutput(
                rids=rids, http_worker_ipcs=owners, output_ids=[[b, j] for j in range(6)]
            )
            inbound.send_multipart(frame_batch(batch, traceparent=f"00-{b:032x}-{1:016x}-01"))

        total = sum(len(rids) for rids, _ in batches)
        received: list[list[list[bytes]]] = [[], []]

        def all_rows_arrived() -> bool:
            for index, sock in enumerate(inboxes):
                while sock.poll(0):
                    received[index].append(sock.recv_multipart())
            rows = sum(len(m) - 1 for msgs in received for m in msgs)
            return rows >= total

        wait_until(all_rows_arrived, 10.0, "every row at a detokenizer", interval=0.005)
        placement: dict[str, set[int]] = defaultdict(set)
        per_batch: Counter[tuple[str, int]] = Counter()
        for index, messages in enumerate(received):
            assert messages, f"detokenizer {index} got nothing"
            for frames in messages:
                header = decode_header(frames[0])
                assert header.kind is Kind.TOKEN_BATCH
                per_batch[(header.traceparent, index)] += 1
                for rid, owner, frame in zip(header.rids, header.reply_to, frames[1:], strict=True):
                    row: Any = decode_payload(header.kind, frame)
                    assert row.rids == [rid] and row.http_worker_ipcs == [owner]
                    placement[rid if sticky_key == "request" else owner].add(index)
        assert sum(len(m) - 1 for msgs in received for m in msgs) == total
        assert {key: {index} for key, index in expected.items()} == dict(placement)
        assert max(per_batch.values()) == 1, "a batch was sent twice to one detokenizer"
        if sticky_key == "request":
            by_worker: dict[str, set[int]] = defaultdict(set)
            for rids, owners in batches:
                for rid, owner in zip(rids, owners, strict=True):
                    by_worker[owner].add(expected[rid])
            assert any(len(v) == 2 for v in by_worker.values()), "rid key must split workers"
        status = detok.ctl("status")
        assert status["sticky_key"] == sticky_key
        if sticky_key == "worker":
            assert status["workers_per_detokenizer"] == [3, 3]
        assert sum(status["counters"]["routed_rows"].values()) == total
        assert "rejected" not in status["counters"]

    def test_freeze_gc_and_idle_go_to_every_detokenizer(
        self, stack: Stack, sockets: SocketFactory
    ) -> None:
        """FREEZE_GC and the idle batch are broadcast: each detokenizer gets each once."""
        endpoints = DetokenizerRouterEndpoints.in_run_dir(stack.run_dir, 2)
        inboxes = [sockets.bound(zmq.PULL, ep) for ep in endpoints.detokenizers]
        detok = stack.start_detok_router(2)
        inbound = sockets.connected(zmq.PUSH, endpoints.inbound)
        inbound.send_multipart(frame_message(Kind.FREEZE_GC, FreezeGC(reason="test")))
        inbound.send_multipart(frame_message(Kind.IDLE, None))
        for sock in inboxes:
            messages = recv_all(sock, lambda m: len(m) >= 2, 10.0)
            kinds = [decode_header(m[0]).kind for m in messages]
            assert kinds == [Kind.FREEZE_GC, Kind.IDLE]
            freeze: Any = decode_payload(Kind.FREEZE_GC, messages[0][1])
            assert freeze.reason == "test"
            assert len(messages[1]) == 1
        assert detok.ctl("status")["counters"]["broadcast"] == {"freeze_gc": 1, "idle": 1}
