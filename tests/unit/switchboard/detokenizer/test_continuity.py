"""Tests for the detokenizer's continuity check: a row that cannot continue its request's
text exactly (state lost, rows lost or repeated) ends the request with an abort, never
with a silently wrong text; every other stream reads exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from router_core.wire.finish import FinishReason, lost_reason
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from switchboard.detokenizer.rows import ALREADY_ABORTED, LOST_STATE, RowDetokenizer
from switchboard.text import Tokenizer
from tests.unit.switchboard.detokenizer.engine_rows import (
    OWNER,
    EngineRun,
    Generation,
    engine_rows,
)

#: How a request whose decoding state is gone ends: lost to a fault (a 503 at the worker).
STATE_LOST = lost_reason("detokenizer_state_lost", LOST_STATE)
#: Twelve requests of 6..22 tokens, run at most 4 at a time so they start at different steps.
GENERATIONS = [Generation(f"r{i}", f"prompt {i} about things", 6 + (i * 7) % 17) for i in range(12)]


def finish_of(text: BatchStrOutput) -> FinishReason | None:
    reason = text.finished_reasons[0] if text.finished_reasons else None
    return FinishReason.of(reason) if reason is not None else None


#: Each request's text rows, by rid.
Texts = dict[str, list[BatchStrOutput]]


def read(rows: RowDetokenizer, run_rows: list[BatchTokenIDOutput]) -> Texts:
    """Each request's text rows, as ``text_row`` answers them (dropped rows left out)."""
    out: Texts = {}
    for index, row in enumerate(run_rows):
        text = rows.text_row(row, OWNER, float(index))
        if text is not None:
            out.setdefault(row.rids[0], []).append(text)
    return out


def joined(texts: list[BatchStrOutput]) -> str:
    return "".join(text.output_strs[0] for text in texts)  # type: ignore[index]


def reference(tokenizer: Tokenizer, run: EngineRun, rid: str, stop: tuple[str, ...] = ()) -> str:
    """What request ``rid`` must read: the decode of its output, cut at its first stop."""
    text = tokenizer.decode(run.output_ids[rid])
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


def length_at_end(index: int, count: int) -> list[dict[str, Any] | None] | None:
    """The finish column of row ``index`` of ``count``: a length finish on the last."""
    return [{"type": "length"}] if index == count - 1 else None


def mid_row(rid: str, position: int, ids: list[int], **columns: Any) -> BatchTokenIDOutput:
    """A token row of ``rid`` whose ``ids`` start at output token ``position``."""
    return BatchTokenIDOutput(
        rids=[rid], output_ids=[ids], completion_tokens=[position + len(ids)], **columns
    )


class TestUnbrokenStreams:
    def test_engine_streams_read_exactly_as_before(self, default_tokenizer: Tokenizer) -> None:
        """The built-in engine's rows read exactly each request's decoded output, the same
        text the unchecked step path gives, and nothing is counted."""
        run = engine_rows(default_tokenizer, GENERATIONS, max_running=4)
        texts = read(RowDetokenizer(default_tokenizer), run.rows)
        unchecked = RowDetokenizer(default_tokenizer)
        before: dict[str, str] = {}
        for row in run.rows:
            rid = row.rids[0]
            before[rid] = before.get(rid, "") + unchecked.step(
                (OWNER, rid),
                row.output_ids[0],  # type: ignore[index]
                row.finished_reasons[0],  # type: ignore[index]
                holdback_chars=row.stop_holdback[0],  # type: ignore[index]
            )
        for generation in GENERATIONS:
            rid = generation.rid
            assert joined(texts[rid]) == reference(default_tokenizer, run, rid) == before[rid]
            assert finish_of(texts[rid][-1]) == FinishReason.of(
                {"type": "length", "length": generation.max_new_tokens}
            )

    def test_stop_strings_held_back_are_still_trimmed_exactly(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """Stop strings spanning tokens (held back by the row's stop_holdback) end each
        text exactly at the match."""
        plain = engine_rows(default_tokenizer, GENERATIONS[:6])
        generations = []
        for generation in GENERATIONS[:6]:
            ids = plain.output_ids[generation.rid]
            boundary = len(default_tokenizer.decode(ids[:4]))
            stop = default_tokenizer.decode(ids)[boundary - 2 : boundary + 3]
            generations.append(Generation(generation.rid, generation.prompt, 30, (stop,)))
        run = engine_rows(default_tokenizer, generations)
        rows = RowDetokenizer(default_tokenizer)
        texts = read(rows, run.rows)
        for generation in generations:
            text = joined(texts[generation.rid])
            assert text == reference(default_tokenizer, run, generation.rid, generation.stop)
            reason = finish_of(texts[generation.rid][-1])
            assert reason is not None and reason.stop_string == generation.stop[0]
        assert rows.counters.snapshot() == {}

    def test_a_retracted_request_continues_where_it_was(self, default_tokenizer: Tokenizer) -> None:
        """Retract-mode pauses re-queue running requests keeping their tokens: the rows
        after them continue where they were, so no request is aborted and every text
        equals the unpaused run's."""
        plain = engine_rows(default_tokenizer, GENERATIONS, max_running=4)
        run = engine_rows(default_tokenizer, GENERATIONS, max_running=4, retract_before=(3, 9, 10))
        assert max(row.retraction_counts[0] for row in run.rows) >= 2  # type: ignore[index]
        assert run.output_ids == plain.output_ids
        rows = RowDetokenizer(default_tokenizer)
        texts = read(rows, run.rows)
        for generation in GENERATIONS:
            rid = generation.rid
            assert joined(texts[rid]) == reference(default_tokenizer, plain, rid)
            reason = finish_of(texts[rid][-1])
            assert reason is not None and reason.type == "length"
        assert rows.counters.snapshot() == {}


class TestLostState:
    def test_a_restarted_detokenizer_aborts_requests_it_joins_mid_stream(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """A fresh detokenizer taking over mid-run (a restart) ends every request it meets
        mid-stream with one abort row and no text; those that started after it read exactly."""
        run = engine_rows(default_tokenizer, GENERATIONS, max_running=4)
        cut = len(run.rows) // 3
        before = read(RowDetokenizer(default_tokenizer), run.rows[:cut])
        restarted = RowDetokenizer(default_tokenizer)
        after = read(restarted, run.rows[cut:])
        outcomes = {"exact": 0, "aborted": 0}
        for generation in GENERATIONS:
            rid = generation.rid
            exact = reference(default_tokenizer, run, rid)
            seen = before.get(rid, []) + after.get(rid, [])
            first_after = after[rid][0] if rid in after else None
            if first_after is not None and rid in before:
                assert [finish_of(t) for t in after[rid]] == [FinishReason.of(STATE_LOST)], rid
                assert after[rid][0].output_strs == [""]
                assert exact.startswith(joined(seen)), rid
                outcomes["aborted"] += 1
            else:
                assert joined(seen) == exact, rid
                outcomes["exact"] += 1
        assert outcomes["aborted"] >= 2 and outcomes["exact"] >= 2, outcomes
        counters = restarted.counters
        assert counters.get("output_continuity", "lost_state") == outcomes["aborted"]
        assert counters.get("dropped", "aborted_request") > 0
        assert len(restarted) == 0 and not any(
            restarted.aborted((OWNER, g.rid)) for g in GENERATIONS
        ), "a request's last row ends what is remembered of it"

    def test_a_final_row_without_state_is_an_abort_not_a_success(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """The last row of a request reaching a detokenizer that never saw the earlier ones
        finishes with an abort naming the lost state, not with its length."""
        rows = RowDetokenizer(default_tokenizer)
        last = mid_row("r", 9, [5], finished_reasons=[{"type": "length", "length": 10}])
        text = rows.text_row(last, OWNER, 0.0)
        assert text is not None and text.output_strs == [""]
        assert text.finished_reasons == [STATE_LOST]
        assert text.completion_tokens == [10] and text.http_worker_ipcs == [OWNER]
        assert not rows.aborted((OWNER, "r")), "no row follows a finished one"

    def test_an_engine_abort_without_state_keeps_its_reason(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """A row that already aborts (a client left) keeps the engine's words, with no text."""
        rows = RowDetokenizer(default_tokenizer)
        reason = {"type": "abort", "message": "client"}
        text = rows.text_row(mid_row("r", 4, [7], finished_reasons=[reason]), OWNER, 0.0)
        assert text is not None and text.finished_reasons == [reason]
        assert text.output_strs == [""]
        assert rows.counters.get("output_continuity", "lost_state") == 1

    def test_row_answers_later_rows_with_a_repeated_abort(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """For a caller sending a row per row, ``row`` answers the later rows of an aborted
        request with an abort again (counted), never with text."""
        rows = RowDetokenizer(default_tokenizer)
        first = rows.row(mid_row("r", 3, [5]), OWNER, 0.0)
        again = rows.row(mid_row("r", 4, [6]), OWNER, 1.0)
        assert finish_of(first) == FinishReason.of(STATE_LOST)
        assert finish_of(again) == FinishReason(type="abort", message=ALREADY_ABORTED)
        assert again.output_strs == [""]
        assert rows.counters.get("output_continuity", "repeated_abort") == 1
        assert rows.counters.get("dropped", "aborted_request") == 0

    def test_token_zero_under_an_aborted_key_is_a_new_request(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """A request id reused after an abort decodes afresh from its first row."""
        rows = RowDetokenizer(default_tokenizer, holdback_chars=0)
        assert rows.text_row(mid_row("r", 3, [5]), OWNER, 0.0) is not None
        assert rows.text_row(mid_row("r", 4, [5]), OWNER, 1.0) is None
        ids = default_tokenizer.encode("fresh start")
        outs = [
            rows.text_row(
                mid_row("r", position, [token], finished_reasons=length_at_end(position, len(ids))),
                OWNER,
                2.0,
            )
            for position, token in enumerate(ids)
        ]
        texts = [out for out in outs if out is not None]
        assert len(texts) == len(ids) and joined(texts) == "fresh start"
        assert finish_of(texts[-1]) == FinishReason(type="length")


class TestLostRows:
    def test_a_gap_aborts_naming_the_missing_tokens(self, default_tokenizer: Tokenizer) -> None:
        """Rows lost before the detokenizer: the next row aborts with the missing range,
        the state is forgotten and the held-back text is never released."""
        ids = default_tokenizer.encode("The quick brown fox jumps over the lazy dog")
        rows = RowDetokenizer(default_tokenizer)
        released = ""
        for position in range(4):
            row = mid_row("r", position, [ids[position]], stop_holdback=[3])
            out = rows.text_row(row, OWNER, 0.0)
            assert out is not None and out.finished_reasons is None
            released += out.output_strs[0]  # type: ignore[index]
        out = rows.text_row(mid_row("r", 7, [ids[7]]), OWNER, 1.0)
        message = "output rows were lost before the detokenizer (tokens 4..6 missing)"
        assert out is not None and out.finished_reasons == [lost_reason("rows_lost", message)]
        assert out.output_strs == [""]
        assert default_tokenizer.decode(ids).startswith(released)
        assert (OWNER, "r") not in rows and rows.aborted((OWNER, "r"))
        assert rows.counters.get("output_continuity", "gap") == 1
        assert rows.text_row(mid_row("r", 8, [ids[8]]), OWNER, 2.0) is None

    def test_a_repeated_row_aborts(self, default_tokenizer: Tokenizer) -> None:
        """A row that starts before the tokens already decoded (sent twice) aborts."""
        rows = RowDetokenizer(default_tokenizer)
        for position in range(3):
            assert rows.text_row(mid_row("r", position, [40 + position]), OWNER, 0.0) is not None
        out = rows.text_row(mid_row("r", 1, [41, 42, 43]), OWNER, 1.0)
        message = (
            "output rows came twice or out of order before the detokenizer "
            "(a row from token 1 after 3 tokens)"
        )
        assert out is not None and out.finished_reasons == [lost_reason("rows_lost", message)]
        assert rows.counters.get("output_continuity", "overlap") == 1

    def test_an_engine_abort_after_a_gap_keeps_its_reason_without_text(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """An abort row that does not follow ends the request with the engine's reason and
        none of the held-back text past the gap."""
        rows = RowDetokenizer(default_tokenizer, holdback_chars=0)
        assert rows.text_row(mid_row("r", 0, [40]), OWNER, 0.0) is not None
        reason = {"type": "abort", "message": "paused"}
        out = rows.text_row(mid_row("r", 5, [], finished_reasons=[reason]), OWNER, 1.0)
        assert out is not None and out.finished_reasons == [reason] and out.output_strs == [""]
        assert len(rows) == 0 and not rows.aborted((OWNER, "r"))


class TestWithoutCompletionTokens:
    def test_rows_without_counts_are_decoded_as_before_and_counted_once(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """An engine that sends no completion_tokens gets today's text, unchecked (even
        mid-stream at a fresh detokenizer), counted once per request."""
        ids = default_tokenizer.encode("no counts here")
        rows = RowDetokenizer(default_tokenizer, holdback_chars=0)
        text = ""
        for index, token in enumerate(ids):
            done = length_at_end(index, len(ids))
            row = BatchTokenIDOutput(rids=["r"], output_ids=[[token]], finished_reasons=done)
            out = rows.text_row(row, OWNER, float(index))
            assert out is not None
            text += out.output_strs[0]  # type: ignore[index]
        assert text == "no counts here"
        assert rows.counters.get("output_continuity", "unchecked") == 1
        fresh = RowDetokenizer(default_tokenizer, holdback_chars=0)
        row = BatchTokenIDOutput(rids=["r"], output_ids=[ids[2:3]])
        out = fresh.text_row(row, OWNER, 0.0)
        assert out is not None and out.finished_reasons is None
        assert out.output_strs == [default_tokenizer.decode(ids[2:3])]


class TestAbortedMemory:
    @pytest.mark.parametrize(("ttl_s", "max_states", "now"), [(10.0, 100, 20.0), (1e9, 2, 5.0)])
    def test_aborted_requests_are_bounded_like_states(
        self, default_tokenizer: Tokenizer, ttl_s: float, max_states: int, now: float
    ) -> None:
        """Aborted requests are forgotten after ttl_s, and the oldest beyond max_states."""
        rows = RowDetokenizer(default_tokenizer, ttl_s=ttl_s, max_states=max_states)
        for index, rid in enumerate(("a", "b", "c")):
            rows.text_row(mid_row(rid, 2, [5]), OWNER, float(index))
        assert all(rows.aborted((OWNER, rid)) for rid in "abc")
        rows.evict(now)
        kept = [rid for rid in "abc" if rows.aborted((OWNER, rid))]
        assert kept == ([] if ttl_s == 10.0 else ["b", "c"])
        assert rows.counters.get("evicted", "aborted_requests") == 3 - len(kept)
