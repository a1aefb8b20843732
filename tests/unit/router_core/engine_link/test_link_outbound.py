"""Tests for what the engine link sends (batches row per request, idle, freeze-GC, acks,
load) and its backpressure: real ZeroMQ sockets, the router side played by test sockets."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
import zmq

from router_core.engine_link import MAX_BATCH_ROWS, EngineEndpoints, EngineLink
from router_core.wire import Kind, WireError, combine_rows, decode_header, decode_message
from router_core.wire.control import Acknowledgement, FreezeGC, LoadSnapshot
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from tests.support.eventually import wait_until
from tests.unit.router_core.engine_link.router_side import (
    OWNER,
    TRACEPARENT,
    RouterSide,
    Sides,
    inproc_endpoints,
    token_batch,
)


class TestSends:
    """Outbound messages: batches row per request, idle, freeze-GC, acks and load."""

    def test_batch_framed_row_per_request(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """A token batch arrives as [header, row...] with owners in reply_to; rows recombine."""
        link, side = pair
        batch = token_batch(["a", "b", "c"])
        assert link.send_batch(batch, traceparent=TRACEPARENT)
        header, rows = decode_message(side.receive(side.outputs))
        assert header.kind is Kind.TOKEN_BATCH and header.rids == ["a", "b", "c"]
        assert header.reply_to == [OWNER] * 3 and header.traceparent == TRACEPARENT
        assert combine_rows(BatchTokenIDOutput, rows) == batch  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("batch", "kind"),
        [
            (
                BatchStrOutput(rids=["s"], http_worker_ipcs=[OWNER], output_strs=["hi"]),
                Kind.STR_BATCH,
            ),
            (
                BatchEmbeddingOutput(rids=["e"], http_worker_ipcs=[OWNER], embeddings=[[0.5]]),
                Kind.EMBEDDING_BATCH,
            ),
        ],
    )
    def test_other_batch_types(
        self,
        pair: tuple[EngineLink, RouterSide],
        batch: BatchStrOutput | BatchEmbeddingOutput,
        kind: Kind,
    ) -> None:
        """String and embedding batches go out with their own kinds."""
        link, side = pair
        assert link.send_batch(batch)
        header, rows = decode_message(side.receive(side.outputs))
        assert header.kind is kind and rows == [batch]
        assert link.counters.snapshot()["sent"] == {kind.name.lower(): 1}

    def test_oversized_batch_split_into_messages(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """A batch beyond MAX_BATCH_ROWS rows goes as several messages, rows in order."""
        link, side = pair
        rids = [f"r{i}" for i in range(MAX_BATCH_ROWS + 5)]
        assert link.send_batch(token_batch(rids))
        first, rest = (decode_message(side.receive(side.outputs)) for _ in range(2))
        assert len(first[0].rids) == MAX_BATCH_ROWS and len(rest[0].rids) == 5
        assert first[0].rids + rest[0].rids == rids
        assert [row.rids[0] for row in rest[1]] == rids[-5:]  # type: ignore[attr-defined]

    def test_batch_without_owners_is_a_caller_error(
        self, pair: tuple[EngineLink, RouterSide]
    ) -> None:
        """A batch with no http_worker_ipcs raises WireError; nothing is sent."""
        link, side = pair
        with pytest.raises(WireError):
            link.send_batch(BatchTokenIDOutput(rids=["a"], output_ids=[[1]]))
        assert not side.outputs.poll(0)

    def test_idle_and_freeze_gc_go_to_outputs(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """send_idle sends a bare IDLE header; forward_freeze_gc passes the command on."""
        link, side = pair
        assert link.send_idle()
        assert link.forward_freeze_gc(FreezeGC(reason="control"))
        assert link.forward_freeze_gc()
        idle = side.receive(side.outputs)
        assert len(idle) == 1 and decode_header(idle[0]).kind is Kind.IDLE
        _, (forwarded,) = decode_message(side.receive(side.outputs))
        _, (own,) = decode_message(side.receive(side.outputs))
        assert forwarded == FreezeGC(reason="control") and own == FreezeGC(reason="engine")

    def test_acknowledge_and_load_go_to_events(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """acknowledge names participant 'engine'; publish_load stamps taken_ns only if 0."""
        link, side = pair
        before = time.time_ns()
        assert link.acknowledge("op-7")
        assert link.publish_load(LoadSnapshot(running=2, step=5))
        assert link.publish_load(LoadSnapshot(step=6, taken_ns=123))
        header, (ack,) = decode_message(side.receive(side.events))
        assert header.kind is Kind.ACK and msgspec.to_builtins(ack) == {
            "op_id": "op-7",
            "participant": "engine",
        }
        _, (stamped,) = decode_message(side.receive(side.events))
        _, (given,) = decode_message(side.receive(side.events))
        assert isinstance(stamped, LoadSnapshot) and stamped.running == 2
        assert before <= stamped.taken_ns <= time.time_ns()
        assert isinstance(given, LoadSnapshot)
        assert given == LoadSnapshot(
            step=6, taken_ns=123, engine_started_ns=given.engine_started_ns
        )
        assert stamped.engine_started_ns == given.engine_started_ns <= before
        assert link.counters.snapshot()["sent"] == {"ack": 1, "load": 2}

    def test_a_link_with_the_key_puts_it_in_acks_and_snapshots(
        self, context: zmq.Context[zmq.Socket[bytes]], sides: Sides
    ) -> None:
        """With ``key``, every acknowledgement and load snapshot carries it as ``secret``
        (a snapshot that names another secret is sent with the key instead)."""
        endpoints = inproc_endpoints()
        link = EngineLink(endpoints, context=context, key="k" * 64).open()
        try:
            side = sides.make(endpoints)
            assert link.acknowledge("op-1")
            assert link.publish_load(LoadSnapshot(step=1, secret="forged"))
            _, (ack,) = decode_message(side.receive(side.events))
            _, (load,) = decode_message(side.receive(side.events))
            assert isinstance(ack, Acknowledgement) and ack.secret == "k" * 64
            assert isinstance(load, LoadSnapshot) and load.secret == "k" * 64
        finally:
            link.close(0.0)


class TestBackpressure:
    """Sends never block: bounded backlogs flushed by poll, drops and closes counted."""

    def test_sent_before_the_router_is_up_then_flushed_by_poll(
        self, run_dir: Path, sides: Sides
    ) -> None:
        """With no peer, a load waits in the backlog; once the peer binds, poll() delivers it."""
        endpoints = EngineEndpoints.in_run_dir(run_dir)
        with EngineLink(endpoints) as link:
            assert link.publish_load(LoadSnapshot(step=1))
            assert link.backlogs() == {"events": 1, "outputs": 0}
            side = sides.make(msgspec.structs.replace(endpoints, inbound="inproc://x"))
            wait_until(lambda: link.poll(20) == [] and link.backlogs()["events"] == 0, 5.0, "flush")
            _, (load,) = decode_message(side.receive(side.events))
            assert isinstance(load, LoadSnapshot)
            assert load == LoadSnapshot(
                step=1, taken_ns=load.taken_ns, engine_started_ns=load.engine_started_ns
            )
            assert 0 < load.engine_started_ns <= load.taken_ns
            assert "dropped" not in link.counters.snapshot()

    def test_full_backlog_drops_and_counts_keeping_order(
        self, context: zmq.Context[zmq.Socket[bytes]], sides: Sides
    ) -> None:
        """A stalled peer fills HWM and backlog; the next send returns False and is counted;
        once the peer reads, poll() flushes the rest in order with only that one missing."""
        endpoints = inproc_endpoints()
        link = EngineLink(endpoints, context=context, hwm=1, backlog_limit=3).open()
        try:
            side = sides.make(endpoints, hwm=1)
            accepted = 0
            while link.send_batch(token_batch([f"r{accepted}"])):
                accepted += 1
                assert accepted < 100, "the backlog never filled"
            assert link.counters.get("dropped", "backlog_full") == 1
            assert link.backlogs()["outputs"] == 3
            received: list[str] = []

            def drained() -> bool:
                link.poll(0)
                while side.outputs.poll(0):
                    received.extend(decode_header(side.outputs.recv_multipart()[0]).rids)
                return len(received) == accepted

            wait_until(drained, 5.0, "every accepted batch delivered")
            assert received == [f"r{i}" for i in range(accepted)]
            assert link.backlogs()["outputs"] == 0
        finally:
            link.close(0.0)

    def test_close_flushes_what_it_can_and_counts_the_rest(self, run_dir: Path) -> None:
        """close(t) drops what no peer took within t, counted as dropped{closed}, in time."""
        link = EngineLink(EngineEndpoints.in_run_dir(run_dir)).open()
        link.acknowledge("op-1")
        link.send_idle()
        started = time.monotonic()
        link.close(0.2)
        assert time.monotonic() - started < 2.0
        assert link.counters.get("dropped", "closed") == 2
