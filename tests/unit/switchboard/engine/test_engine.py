"""Tests for the built-in engine's output rows (what the detokenizers receive), and what
it sends for the requests it reads, over a real engine link."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from router_core.engine_link import EngineLink
from router_core.wire import Kind, decode_message, frame_message
from router_core.wire.finish import lost_reason
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import EmbeddingRequest
from switchboard.engine import generated_token
from switchboard.engine.engine import (
    INIT_DETOKENIZE_OFFSET,
    BuiltinEngine,
    OutputOptions,
    token_batch,
)
from switchboard.engine.scheduler import Scheduler, SchedulerConfig, Sequence, StepRow
from tests.unit.router_core.engine_link import router_side
from tests.unit.router_core.engine_link.router_side import (
    RouterSide,
    Sides,
    generate,
    inproc_endpoints,
    poll_until,
)

OWNER = "ipc:///tmp/sb/worker-w0"
POOL = tuple(range(10, 110))


def row(rid: str, stop: tuple[str, ...] = (), output: list[int] | None = None) -> StepRow:
    ids = output or [7, 8]
    sequence = Sequence(
        rid=rid,
        owner=OWNER,
        prompt=list(range(1, 9)),
        stop=stop,
        output_ids=list(ids),
        context=OutputOptions(no_stop_trim=True),
    )
    return StepRow(sequence=sequence, new_ids=ids[-1:])


class TestTokenBatch:
    def test_stop_holdback_is_the_longest_stop_minus_one(self) -> None:
        """Requests without stop strings are not held back; others by their longest stop."""
        batch = token_batch([row("a"), row("b", ("x",)), row("c", ("ab", "\n\n\n\n"))])
        assert batch.stop_holdback == [0, 0, 3]

    def test_rows_follow_the_incremental_shape(self) -> None:
        """decode_ids holds the prompt's tail then the output; read_offsets marks the output."""
        batch = token_batch([row("a", output=[7, 8, 9])])
        assert batch.rids == ["a"] and batch.http_worker_ipcs == [OWNER]
        assert batch.output_ids == [[9]] and batch.completion_tokens == [3]
        assert batch.decode_ids == [[4, 5, 6, 7, 8, 7, 8, 9]]
        assert batch.read_offsets == [INIT_DETOKENIZE_OFFSET]
        assert batch.no_stop_trim == [True]


@pytest.fixture
def engine(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[tuple[BuiltinEngine, RouterSide]]:
    """A built-in engine whose queue holds one request, on an open inproc link, and the
    router side facing it."""
    endpoints = inproc_endpoints()
    link = EngineLink(endpoints, context=context).open()
    sides = Sides(context)
    config = SchedulerConfig(token_pool=POOL, max_waiting_requests=1)
    try:
        yield BuiltinEngine(link, Scheduler(config)), sides.make(endpoints)
    finally:
        sides.close()
        link.close(0.0)


class TestHandle:
    """What handle() sends for the requests it reads."""

    def test_full_queue_answers_at_once_with_an_abort_row(
        self, engine: tuple[BuiltinEngine, RouterSide]
    ) -> None:
        """With one request waiting, a generation and an embedding each get their abort
        row at once, as a token and an embedding batch, counted as rejected queue_full;
        the waiting request then runs as usual."""
        builtin, side = engine
        embed = EmbeddingRequest(rid="e", input_ids=[4, 5])
        side.send(
            generate("a"),
            generate("b"),
            frame_message(Kind.EMBED, embed, rids=["e"], reply_to=[router_side.OWNER]),
        )
        for item in poll_until(builtin.link, 3):
            builtin.handle(item)
        message = "the engine's waiting queue is full (1 waiting); retry later"
        refused = lost_reason("engine_queue_full", message)  # a 503 at the worker
        for kind, rid in ((Kind.TOKEN_BATCH, "b"), (Kind.EMBEDDING_BATCH, "e")):
            header, (answer,) = decode_message(side.receive(side.outputs))
            assert (header.kind, header.rids, header.reply_to) == (kind, [rid], [router_side.OWNER])
            assert isinstance(answer, BatchTokenIDOutput | BatchEmbeddingOutput)
            assert answer.finished_reasons == [refused]
        assert builtin.link.counters.get("rejected", "queue_full") == 2
        assert [s.rid for s in builtin.scheduler.waiting] == ["a"]
        builtin.send(builtin.scheduler.step(0.0))
        header, (answer,) = decode_message(side.receive(side.outputs))
        assert header.rids == ["a"] and isinstance(answer, BatchTokenIDOutput)
        assert answer.output_ids == [[generated_token(POOL, [1, 2, 3], 0)]]
        assert answer.finished_reasons == [None]
