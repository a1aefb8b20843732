"""Tests for the detokenizer's pure part: token rows in, text rows out, bounded state."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from router_core.wire.outputs import BatchTokenIDOutput
from router_core.wire.split import batch_columns
from switchboard.detokenizer import RowDetokenizer, str_row
from switchboard.detokenizer.row_columns import MAX_CONTEXT_IDS, prompt_context
from switchboard.text import Tokenizer

FFFD = "\ufffd"
OWNER = "ipc:///tmp/sb/worker-w0"
#: Emoji and scripts the training corpus lacks, so byte-level tokens split characters.
MULTIBYTE = "Zoë 🦩🫠 says 日本語 and 👩‍💻 ΩЖ 𝄞 done"


def steps(
    rows: RowDetokenizer,
    ids: list[int],
    finished: dict[str, Any] | None = None,
    key: tuple[str, str] = (OWNER, "r"),
    **options: Any,
) -> list[str]:
    """Feed ``ids`` one per step (as the built-in engine does); the last step finishes."""
    out = []
    for index, token in enumerate(ids):
        last = index == len(ids) - 1
        out.append(rows.step(key, [token], finished if last else None, now=float(index), **options))
    return out


def stop_step(tokenizer: Tokenizer, ids: list[int], stop: str) -> int:
    """How many ids the engine emits before it sees ``stop`` in the decoded output."""
    for count in range(1, len(ids) + 1):
        if stop in tokenizer.decode(ids[:count]):
            return count
    raise AssertionError(f"{stop!r} never appears")


class TestText:
    @pytest.mark.parametrize("holdback", [0, 1, 32])
    def test_multibyte_characters_split_across_ids(
        self, default_tokenizer: Tokenizer, holdback: int
    ) -> None:
        """One id per step: the pieces join to decode(ids) and no piece carries a
        replacement character for a character that is merely incomplete."""
        ids = default_tokenizer.encode(MULTIBYTE)
        pieces = [default_tokenizer.decode([i]) for i in ids]
        assert any(FFFD in piece for piece in pieces), "the text must split a character"
        rows = RowDetokenizer(default_tokenizer, holdback_chars=holdback)
        out = steps(rows, ids, {"type": "length", "length": len(ids)})
        assert "".join(out) == default_tokenizer.decode(ids) == MULTIBYTE
        assert all(FFFD not in piece for piece in out)
        assert len(rows) == 0, "a finished request is forgotten"

    def test_holdback_delays_but_never_loses_text(self, default_tokenizer: Tokenizer) -> None:
        ids = default_tokenizer.encode("The quick brown fox jumps over the lazy dog")
        rows = RowDetokenizer(default_tokenizer, holdback_chars=10)
        out = steps(rows, ids, {"type": "length", "length": len(ids)})
        assert "".join(out[:-1]) == default_tokenizer.decode(ids[:-1])[:-10]
        assert "".join(out) == default_tokenizer.decode(ids)

    @pytest.mark.parametrize(
        ("text", "stop"),
        [
            ("Hello there, my friend. STOPPING now", "STOP"),
            ("emoji 🦩🫠 then more", "🫠 the"),
            ("日本語 is spoken here", "語 is"),
        ],
    )
    def test_stop_string_spanning_tokens_is_trimmed(
        self, default_tokenizer: Tokenizer, text: str, stop: str
    ) -> None:
        ids = default_tokenizer.encode(text)
        count = stop_step(default_tokenizer, ids, stop)
        decoded = default_tokenizer.decode(ids[:count])
        assert count > 1 and stop not in default_tokenizer.decode(ids[: count - 1])
        finished = {"type": "stop", "matched": stop}
        rows = RowDetokenizer(default_tokenizer, holdback_chars=len(stop))
        out = steps(rows, ids[:count], finished)
        assert "".join(out) == decoded[: decoded.index(stop)]
        assert rows.counters.snapshot() == {}

        kept = RowDetokenizer(default_tokenizer, holdback_chars=len(stop))
        out = steps(kept, ids[:count], finished, key=(OWNER, "k"), no_stop_trim=True)
        assert "".join(out) == decoded[: decoded.index(stop) + len(stop)]

    def test_stop_string_older_than_the_holdback_is_counted(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """With no hold-back, text released before the match cannot be taken back."""
        text, stop = "Hello there, my friend. STOPPING now", "friend. STOP"
        ids = default_tokenizer.encode(text)
        count = stop_step(default_tokenizer, ids, stop)
        rows = RowDetokenizer(default_tokenizer, holdback_chars=0)
        out = steps(rows, ids[:count], {"type": "stop", "matched": stop})
        assert out[-1] == ""
        assert rows.counters.get("stop_trim", "late") == 1

    def test_stop_token_is_trimmed_unless_no_stop_trim(self, default_tokenizer: Tokenizer) -> None:
        ids = default_tokenizer.encode("short answer")
        eos = default_tokenizer.eos_token_id
        assert eos is not None
        finished = {"type": "stop", "matched": eos}
        rows = RowDetokenizer(default_tokenizer)
        assert "".join(steps(rows, [*ids, eos], finished)) == "short answer"
        out = steps(
            rows,
            [*ids, eos],
            finished,
            key=(OWNER, "kept"),
            no_stop_trim=True,
            skip_special_tokens=False,
            spaces_between_special_tokens=False,
        )
        assert "".join(out) == "short answer<|endoftext|>"
        # A plain (non-special) stop token id is trimmed too.
        last = ids[-1]
        out = steps(rows, ids, {"type": "stop", "matched": last}, key=(OWNER, "plain"))
        assert "".join(out) == default_tokenizer.decode(ids[:-1])

    def test_requests_are_independent(self, default_tokenizer: Tokenizer) -> None:
        """State is per (owner, rid): the same rid of two workers does not mix."""
        a = default_tokenizer.encode("alpha 🦩")
        b = default_tokenizer.encode("beta 日本")
        rows = RowDetokenizer(default_tokenizer, holdback_chars=0)
        texts = {"a": "", "b": ""}
        for index in range(max(len(a), len(b))):
            for name, ids, owner in (("a", a, "w0"), ("b", b, "w1")):
                if index < len(ids):
                    done = {"type": "length"} if index == len(ids) - 1 else None
                    texts[name] += rows.step((owner, "same"), [ids[index]], done)
        assert texts == {"a": "alpha 🦩", "b": "beta 日本"}


class TestState:
    def test_idle_states_are_evicted_and_counted(self, default_tokenizer: Tokenizer) -> None:
        rows = RowDetokenizer(default_tokenizer, ttl_s=10.0)
        rows.step((OWNER, "old"), [5], None, now=0.0)
        rows.step((OWNER, "new"), [5], None, now=8.0)
        assert rows.evict(9.0) == 0 and len(rows) == 2
        assert rows.evict(12.0) == 1
        assert (OWNER, "new") in rows and (OWNER, "old") not in rows
        assert rows.counters.get("evicted", "states") == 1

    def test_states_beyond_the_limit_are_evicted_oldest_first(
        self, default_tokenizer: Tokenizer
    ) -> None:
        rows = RowDetokenizer(default_tokenizer, max_states=2)
        for index, rid in enumerate(("a", "b", "c")):
            rows.step((OWNER, rid), [5], None, now=float(index))
        rows.step((OWNER, "a"), [6], None, now=3.0)  # "a" is fresh again
        assert rows.evict(4.0) == 1
        assert (OWNER, "b") not in rows and len(rows) == 2

    def test_bad_settings_are_refused(self, default_tokenizer: Tokenizer) -> None:
        with pytest.raises(ValueError):
            RowDetokenizer(default_tokenizer, holdback_chars=-1)
        with pytest.raises(ValueError):
            RowDetokenizer(default_tokenizer, max_states=0)


class TestRows:
    def test_text_row_copies_every_shared_column(self, default_tokenizer: Tokenizer) -> None:
        ids = default_tokenizer.encode("hi")
        row = BatchTokenIDOutput(
            rids=["r"],
            finished_reasons=[{"type": "length", "length": len(ids)}],
            prompt_tokens=[4],
            cached_tokens=[1],
            completion_tokens=[len(ids)],
            output_ids=[ids],
            retraction_counts=[0],
            customized_info={"x": [7]},
            decode_ids=[ids],
            read_offsets=[0],
            skip_special_tokens=[True],
            spaces_between_special_tokens=[True],
            no_stop_trim=[False],
        )
        text = RowDetokenizer(default_tokenizer).row(row, OWNER, 0.0)
        assert text.output_strs == ["hi"]
        assert text.http_worker_ipcs == [OWNER]
        for column in batch_columns(type(text)):
            if column.name not in ("output_strs", "http_worker_ipcs"):
                assert getattr(text, column.name) == getattr(row, column.name, None), column
        assert text.prompt_tokens == [4] and text.customized_info == {"x": [7]}

    @pytest.mark.parametrize(("column", "held"), [(None, 32), ([0], 0), ([4], 4)])
    def test_row_holdback_comes_from_the_row(
        self, default_tokenizer: Tokenizer, column: list[int] | None, held: int
    ) -> None:
        """A row's stop_holdback sets its request's window; without it the default applies."""
        text = "The quick brown fox jumps over the lazy dog and keeps on running"
        ids = default_tokenizer.encode(text)
        rows = RowDetokenizer(default_tokenizer, holdback_chars=32)
        released = ""
        for index, token in enumerate(ids):
            row = BatchTokenIDOutput(rids=["r"], output_ids=[[token]], stop_holdback=column)
            released += rows.row(row, OWNER, float(index)).output_strs[0]  # type: ignore[index]
        assert released == text[: len(text) - held]

    def test_str_row_leaves_absent_columns_absent(self) -> None:
        text = str_row(BatchTokenIDOutput(rids=["r"]), OWNER, "")
        assert text.output_ids is None and text.finished_reasons is None


def first_row(
    output: list[int], decode_ids: list[int] | None, read: int | None, total: int = 1
) -> BatchTokenIDOutput:
    """A request's token row (its first unless ``total`` says more came before)."""
    return BatchTokenIDOutput(
        rids=["r"],
        completion_tokens=[total],
        output_ids=[output],
        decode_ids=None if decode_ids is None else [decode_ids],
        read_offsets=None if read is None else [read],
    )


class TestPromptContext:
    """The first row's decode_ids[:read_offsets] is the context its text continues."""

    def test_sglang_shape_gives_the_prompt_tail(self) -> None:
        assert prompt_context(first_row([9], [1, 2, 3, 9], 3)) == [1, 2, 3]
        long = list(range(20))
        assert prompt_context(first_row([99], [*long, 99], 20)) == long[-MAX_CONTEXT_IDS:]

    @pytest.mark.parametrize(
        ("output", "decode_ids", "read"),
        [
            ([9], None, None),  # an engine that sends neither column
            ([9], [9], 0),  # decode_ids without a prompt tail (docs/engine.md's first form)
            ([8, 9], [8, 9], 1),  # read_offsets inside the output: not a prompt tail
            ([9], [1, 2, 9], 5),  # an offset past the ids
            ([9], [1, 2, 7], 2),  # the ids after the offset are not the output
            ([9], [], 0),
        ],
    )
    def test_anything_else_gives_none(
        self, output: list[int], decode_ids: list[int] | None, read: int | None
    ) -> None:
        assert prompt_context(first_row(output, decode_ids, read)) == []

    def test_the_first_row_sets_the_context(self, metaspace_tokenizer: Tokenizer) -> None:
        """A SentencePiece-style first token keeps its space after the prompt's ids, and
        later rows' columns do not change the request's context."""
        prompt = metaspace_tokenizer.encode("so the")
        output = metaspace_tokenizer.encode("so the server tokens")[len(prompt) :]
        assert len(output) >= 2
        rows = RowDetokenizer(metaspace_tokenizer, holdback_chars=0)
        text = ""
        for index in range(len(output)):
            row = first_row(output[index : index + 1], prompt + output[: index + 1], len(prompt))
            text += rows.text_row(
                msgspec.structs.replace(row, completion_tokens=[index + 1]), OWNER, 0.0
            ).output_strs[0]
        bare = RowDetokenizer(metaspace_tokenizer, holdback_chars=0)
        bare_text = "".join(steps(bare, output))
        assert text == " server tokens" and bare_text == "server tokens"
