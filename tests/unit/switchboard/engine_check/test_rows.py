"""engine-check's reading of a request's rows (rows.py): ids, finish and every breach."""

from __future__ import annotations

from typing import Any

import msgspec

from router_core.wire import Header, Kind
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from switchboard.engine_check.rows import (
    FIXES,
    Message,
    gather,
    rows_framed_after,
    shared_messages,
)

ME = "ipc:///tmp/sb/worker-engine-check"


def token_row(rid: str, ids: list[int], count: int | None, **columns: Any) -> BatchTokenIDOutput:
    """A one-row token batch of ``rid``."""
    return BatchTokenIDOutput(
        rids=[rid],
        http_worker_ipcs=[columns.pop("owner", ME)],
        output_ids=[ids],
        completion_tokens=None if count is None else [count],
        finished_reasons=[columns.pop("finish", None)],
        **{name: [value] for name, value in columns.items()},  # type: ignore[arg-type]
    )


def message(*rows: BatchTokenIDOutput, reply_to: str = ME) -> Message:
    """A TOKEN_BATCH message of ``rows``."""
    return Message(
        Header(Kind.TOKEN_BATCH, [row.rids[0] for row in rows], [reply_to] * len(rows)), rows
    )


class TestGather:
    """gather: one request's rows in order, checked against protocol.md 3.6 and 3.7."""

    def test_incremental_rows(self) -> None:
        """Incremental rows give the ids in order, the finish and the counts; no breach."""
        done = {"type": "length", "length": 3}
        run = gather(
            "a",
            ME,
            [
                message(token_row("a", [5], 1, prompt_tokens=4)),
                message(token_row("a", [6, 7], 3, prompt_tokens=4, finish=done)),
            ],
        )
        assert (run.ids, run.rows, run.finish, run.completion_tokens) == ([5, 6, 7], 2, done, 3)
        assert run.prompt_tokens == 4 and run.finish_type == "length" and not run.breaches

    def test_cumulative_rows_break_continuity(self) -> None:
        """A row holding every id so far starts before the tokens already sent."""
        run = gather("a", ME, [message(token_row("a", [5], 1)), message(token_row("a", [5, 6], 2))])
        assert [breach.code for breach in run.breaches] == ["continuity"]
        assert "starts at token 0" in run.breaches[0].seen
        assert run.breaches[0].fix == FIXES["continuity"]

    def test_missing_columns(self) -> None:
        """No completion_tokens, and no output_ids, are each a breach."""
        row = BatchTokenIDOutput(rids=["a"], http_worker_ipcs=[ME])
        run = gather("a", ME, [message(row)])
        assert {breach.code for breach in run.breaches} == {"no_output_ids", "no_completion_tokens"}

    def test_other_owner(self) -> None:
        """A header naming another return address is a breach and its row is not read."""
        run = gather("a", ME, [message(token_row("a", [5], 1), reply_to="ipc:///elsewhere")])
        assert [breach.code for breach in run.breaches] == ["reply_to"] and run.rows == 0

    def test_row_owner_differs_from_header(self) -> None:
        """A row whose http_worker_ipcs is not the header's owner is a breach."""
        run = gather("a", ME, [message(token_row("a", [5], 1, owner="ipc:///x"))])
        assert [breach.code for breach in run.breaches] == ["owner"]

    def test_rows_after_the_finish(self) -> None:
        """A second finishing row, or any row after the finish, is a breach."""
        stop = {"type": "stop", "matched": None}
        run = gather(
            "a",
            ME,
            [
                message(token_row("a", [5], 1, finish=stop)),
                message(token_row("a", [], 1, finish=stop)),
            ],
        )
        assert {breach.code for breach in run.breaches} == {"after_finish", "two_finishes"}

    def test_finish_time_is_the_engines(self) -> None:
        """The finishing row's message sent_ns (the engine's clock) is kept."""
        done = message(token_row("a", [5], 1, finish={"type": "length", "length": 1}))
        stamped = Message(msgspec.structs.replace(done.header, sent_ns=42), done.rows)
        assert gather("a", ME, [stamped]).finish_sent_ns == 42

    def test_stop_holdback_and_embedding(self) -> None:
        """stop_holdback values are collected; an embedding row gives its vector."""
        run = gather("a", ME, [message(token_row("a", [5], 1, stop_holdback=2))])
        assert run.stop_holdbacks == {2}
        embed = BatchEmbeddingOutput(
            rids=["e"],
            http_worker_ipcs=[ME],
            embeddings=[[0.5, 1.0]],
            finished_reasons=[{"type": "stop", "matched": None}],
        )
        header = Header(Kind.EMBEDDING_BATCH, ["e"], [ME])
        found = gather("e", ME, [Message(header, [embed])])
        assert found.embedding == [0.5, 1.0] and found.finished

    def test_other_requests_and_kinds_ignored(self) -> None:
        """Rows of other requests and non-batch messages are not this request's."""
        idle = Message(Header(Kind.IDLE), [])
        run = gather("a", ME, [idle, message(token_row("b", [1], 1))])
        assert run.rows == 0 and not run.breaches and not run.finished


class TestRowsFramedAfter:
    """rows_framed_after counts a request's rows in messages framed after a moment."""

    def test_by_the_engines_clock(self) -> None:
        """Only messages whose header sent_ns is later count, whatever their order."""
        early = message(token_row("a", [1], 1))
        late = message(token_row("a", [2], 2), token_row("b", [3], 1))
        stamped = [
            Message(msgspec.structs.replace(late.header, sent_ns=30), late.rows),
            Message(msgspec.structs.replace(early.header, sent_ns=10), early.rows),
        ]
        assert rows_framed_after("a", stamped, 20) == 1
        assert rows_framed_after("a", stamped, 5) == 2
        assert rows_framed_after("c", stamped, 5) == 0


class TestSharedMessages:
    """shared_messages counts messages carrying rows of two or more of the requests."""

    def test_counts_shared(self) -> None:
        """One message with rows of a and b, one with a alone: one shared."""
        both = message(token_row("a", [1], 1), token_row("b", [2], 1))
        alone = message(token_row("a", [3], 2))
        assert shared_messages(["a", "b"], [both, alone]) == 1
        assert shared_messages(["a", "c"], [both, alone]) == 0
