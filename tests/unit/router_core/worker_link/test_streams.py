"""Tests for response streams: rows in arrival order until a finishing row, and the
end-to-end check that ends a stream with an abort when its text rows do not follow."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from router_core.wire.finish import abort_reason, length_reason, lost_reason
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from router_core.worker_link.errors import RequestLost
from router_core.worker_link.streams import (
    UNDETOKENIZED_MESSAGE,
    OutputRow,
    ResponseStream,
    finish_reason_of,
    rows_lost_message,
)


def text_row(
    position: int, ids: list[int], text: str = "", finished: dict[str, Any] | None = None
) -> BatchStrOutput:
    """A detokenizer's text row of request ``r`` whose ``ids`` start at token ``position``."""
    return BatchStrOutput(
        rids=["r"],
        output_strs=[text],
        output_ids=[ids],
        completion_tokens=[position + len(ids)],
        finished_reasons=[finished],
        prompt_tokens=[4],
        cached_tokens=[1],
    )


def put_all(stream: ResponseStream, rows: list[OutputRow]) -> list[bool]:
    return [stream.put(row) for row in rows]


def texts(rows: list[OutputRow]) -> str:
    return "".join(row.output_strs[0] for row in rows if isinstance(row, BatchStrOutput))  # type: ignore[index]


class TestDelivery:
    def test_rows_that_follow_arrive_as_they_are(self) -> None:
        """Rows one token (or several) apiece, in order, are queued unchanged until the
        finishing one; later rows are refused."""
        stream = ResponseStream("r")
        rows: list[OutputRow] = [
            text_row(0, [5], "Hel"),
            text_row(1, [6, 7], "lo, "),
            text_row(3, [8], "you", length_reason(4)),
        ]
        assert put_all(stream, rows) == [True, True, True]
        assert stream.finished and stream.output_gap is None
        assert not stream.put(text_row(4, [9], "late"))
        got = stream.take_ready()
        assert all(a is b for a, b in zip(got, rows, strict=True))
        assert texts(got) == "Hello, you"

    def test_next_row_waits_for_the_next_row(self) -> None:
        """A reader waiting on an empty stream gets the row put after it started waiting."""

        async def scenario() -> OutputRow:
            stream = ResponseStream("r")
            reader = asyncio.ensure_future(stream.next_row())
            await asyncio.sleep(0)
            assert not reader.done()
            stream.put(text_row(0, [5], "a"))
            return await asyncio.wait_for(reader, 5.0)

        assert texts([asyncio.run(scenario())]) == "a"

    def test_put_moves_the_idle_clock(self) -> None:
        """Every row accepted restarts the idle clock."""
        stream = ResponseStream("r")
        stream.updated_at = before = time.monotonic() - 100.0
        stream.put(text_row(0, [5]))
        assert stream.updated_at > before + 99.0

    def test_close_ends_an_open_stream_with_its_reason(self) -> None:
        """Closing ends the stream once with a synthetic row; that is not a gap."""
        stream = ResponseStream("r")
        stream.put(text_row(0, [5], "a"))
        stream.close(abort_reason("worker shutting down"))
        stream.close(abort_reason("twice"))
        last = stream.take_ready()[-1]
        assert finish_reason_of(last) == abort_reason("worker shutting down")
        assert stream.output_gap is None


class TestEndToEndCheck:
    def test_a_gap_ends_the_stream_with_an_abort_naming_the_missing_tokens(self) -> None:
        """A text row starting past the tokens received is replaced by an abort row with
        no text; the stream ends and records where."""
        stream = ResponseStream("r")
        stream.put(text_row(0, [5, 6], "ab"))
        stream.put(text_row(2, [7], "c"))
        assert stream.put(text_row(6, [9], "WRONG"))
        assert stream.finished and stream.output_gap == (3, 6)
        assert not stream.put(text_row(7, [10], "more", length_reason(8)))
        got = stream.take_ready()
        assert texts(got) == "abc"
        message = "output rows were lost between the engine and this worker (tokens 3..5 missing)"
        assert finish_reason_of(got[-1]) == lost_reason("rows_lost", message)
        last = got[-1]
        assert isinstance(last, BatchStrOutput)
        assert last.rids == ["r"] and last.output_strs == [""]
        assert last.completion_tokens == [3], "the tokens the client's text covers"
        assert last.prompt_tokens == [4] and last.cached_tokens == [1]

    def test_a_lost_final_row_of_the_first_token_is_a_gap_too(self) -> None:
        """A stream whose first rows never came aborts at its first row, even a finishing one."""
        stream = ResponseStream("r")
        stream.put(text_row(4, [9], "tail", length_reason(5)))
        (row,) = stream.take_ready()
        assert stream.output_gap == (0, 4) and stream.finished
        assert finish_reason_of(row) == lost_reason("rows_lost", rows_lost_message(0, 4))

    def test_a_repeated_row_ends_the_stream(self) -> None:
        """A row starting before the tokens received (sent twice) ends the stream."""
        stream = ResponseStream("r")
        stream.put(text_row(0, [5], "a"))
        stream.put(text_row(1, [6], "b"))
        stream.put(text_row(1, [6], "b"))
        assert stream.output_gap == (2, 1)
        reason = finish_reason_of(stream.take_ready()[-1])
        assert reason == lost_reason(
            "rows_lost",
            "output rows came twice or out of order between the engine and this worker "
            "(a row from token 1 after 2 tokens)",
        )

    def test_rows_that_already_abort_pass_as_they_are(self) -> None:
        """A detokenizer's abort (its own check failed) keeps its message, though it does
        not follow; so does an engine abort, which follows with no new ids."""
        for position, ids in ((7, [9]), (2, [])):
            stream = ResponseStream("r")
            stream.put(text_row(0, [5, 6], "ab"))
            reason = lost_reason("detokenizer_state_lost", "the detokenizer lost it")
            aborted = text_row(position, ids, "", reason)
            stream.put(aborted)
            assert stream.take_ready()[-1] is aborted
            assert stream.finished and stream.output_gap is None

    def test_rows_without_both_columns_are_not_checked(self) -> None:
        """Rows without output_ids or completion_tokens, and embeddings, pass unchecked."""
        stream = ResponseStream("r")
        rows: list[OutputRow] = [
            BatchStrOutput(rids=["r"], output_strs=["x"], completion_tokens=[9]),
            BatchStrOutput(rids=["r"], output_strs=["y"], output_ids=[[3]]),
        ]
        assert put_all(stream, rows) == [True] * 2
        assert stream.take_ready() == rows and stream.output_gap is None
        embedding = BatchEmbeddingOutput(
            rids=["e"], embeddings=[[0.5]], finished_reasons=[{"type": "stop", "matched": None}]
        )
        other = ResponseStream("e")
        assert other.put(embedding) and other.finished and other.output_gap is None

    def test_a_token_row_ends_the_stream_with_a_502(self) -> None:
        """A token row has no text for a worker to answer: the stream ends at once with
        an abort of status 502 naming the cause, never an empty success; later rows are
        dropped."""
        stream = ResponseStream("r")
        stream.put(text_row(0, [5], "a"))
        token_row = BatchTokenIDOutput(
            rids=["r"], output_ids=[[6]], completion_tokens=[2], prompt_tokens=[4]
        )
        assert stream.put(token_row) and stream.finished
        ended = stream.take_ready()[-1]
        assert isinstance(ended, BatchStrOutput) and ended.output_strs == [""]
        assert ended.finished_reasons == [
            {
                "type": "abort",
                "message": UNDETOKENIZED_MESSAGE,
                "status_code": 502,
                "err_type": "token_rows",
            }
        ]
        assert ended.completion_tokens == [1] and ended.prompt_tokens == [4]
        assert not stream.put(text_row(2, [7], "c"))
        lost = RequestLost.from_reason(ended.finished_reasons[0])
        assert lost is not None and (lost.status, lost.cause) == (502, "token_rows")

    def test_text_rows_checked_after_unchecked_ones_count_only_theirs(self) -> None:
        """The count moves only with checked rows: a checked row after unchecked ones
        must start where the checked ones ended."""
        stream = ResponseStream("r")
        stream.put(text_row(0, [5], "a"))
        stream.put(BatchStrOutput(rids=["r"], output_strs=["?"]))
        stream.put(text_row(1, [6], "b", length_reason(2)))
        assert stream.finished and stream.output_gap is None
