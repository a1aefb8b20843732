"""Tests for incremental detokenization and stop conditions."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from switchboard.text import IncrementalDetokenizer, StopChecker, TextDelta, Tokenizer

SETTINGS = settings(max_examples=150, deadline=None)
FFFD = "\ufffd"

#: Text with a weight on multi-byte characters, including ones the corpus lacks (so they
#: are split across byte-level tokens): emoji, ZWJ sequences, CJK, Hangul, Greek, Cyrillic.
TEXT = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="ab é日本語中文한국어😀🦩🫠👩‍💻ΩЖ\n𝄞", max_size=40),
)
#: Chunk sizes for feeding ids several at a time.
CHUNKS = st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=20)


def chunked(ids: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """``ids`` cut into consecutive chunks of ``sizes`` (cycled), the last one shorter."""
    chunks, start, index = [], 0, 0
    while start < len(ids):
        size = sizes[index % len(sizes)]
        chunks.append(list(ids[start : start + size]))
        start, index = start + size, index + 1
    return chunks


def run(detokenizer: IncrementalDetokenizer, chunks: Sequence[Sequence[int]]) -> list[TextDelta]:
    """Feed every chunk, then finish; every delta, in order."""
    return [*(detokenizer.feed(chunk) for chunk in chunks), detokenizer.finish()]


def joined(deltas: Sequence[TextDelta]) -> str:
    return "".join(delta.text for delta in deltas)


class TestIncrementalDecode:
    """Concatenated pieces equal a one-shot decode, however the ids are chunked."""

    @SETTINGS
    @given(text=TEXT)
    def test_one_at_a_time(self, default_tokenizer: Tokenizer, text: str) -> None:
        """Feeding ids singly yields decode(all ids), with no U+FFFD piece when none is due."""
        ids = default_tokenizer.encode(text)
        deltas = run(IncrementalDetokenizer(default_tokenizer), [[i] for i in ids])
        full = default_tokenizer.decode(ids)
        assert joined(deltas) == full
        if FFFD not in full:
            assert all(FFFD not in delta.text for delta in deltas)

    @SETTINGS
    @given(text=TEXT, sizes=CHUNKS)
    def test_random_chunks(self, default_tokenizer: Tokenizer, text: str, sizes: list[int]) -> None:
        """Feeding ids in random chunk sizes yields decode(all ids)."""
        ids = default_tokenizer.encode(text)
        deltas = run(IncrementalDetokenizer(default_tokenizer), chunked(ids, sizes))
        assert joined(deltas) == default_tokenizer.decode(ids)
        assert all(FFFD not in delta.text for delta in deltas) or FFFD in text

    def test_split_character_is_held_back(self, default_tokenizer: Tokenizer) -> None:
        """A character split across tokens is emitted whole, once its last byte arrives."""
        ids = default_tokenizer.encode("🦩")
        assert len(ids) > 1 and FFFD in default_tokenizer.decode(ids[:1])  # the premise
        detokenizer = IncrementalDetokenizer(default_tokenizer)
        pieces = [detokenizer.feed([token_id]).text for token_id in ids]
        assert pieces == [""] * (len(ids) - 1) + ["🦩"]

    def test_finish_flushes_incomplete_tail(self, default_tokenizer: Tokenizer) -> None:
        """A request that ends mid-character gets the replacement text at finish."""
        first = default_tokenizer.encode("🦩")[0]
        detokenizer = IncrementalDetokenizer(default_tokenizer)
        assert detokenizer.feed([first]).text == ""
        assert detokenizer.finish() == TextDelta(default_tokenizer.decode([first]), True, None)
        assert detokenizer.feed([first]) == TextDelta("", True, None)

    @SETTINGS
    @given(
        text=TEXT,
        specials=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3)), max_size=4),
        skip=st.booleans(),
        spaces=st.booleans(),
        sizes=CHUNKS,
    )
    def test_special_tokens(
        self,
        default_tokenizer: Tokenizer,
        text: str,
        specials: list[tuple[int, int]],
        skip: bool,
        spaces: bool,
        sizes: list[int],
    ) -> None:
        """With special ids anywhere, pieces match decode() under the same options."""
        ids = default_tokenizer.encode(text)
        for position, special_id in specials:
            ids.insert(min(position, len(ids)), special_id)
        options = {"skip_special_tokens": skip, "spaces_between_special_tokens": spaces}
        detokenizer = IncrementalDetokenizer(default_tokenizer, **options)
        assert joined(run(detokenizer, chunked(ids, sizes))) == default_tokenizer.decode(
            ids, **options
        )


class TestStopStrings:
    """Stop strings are found across token boundaries and trimmed, whatever the chunking."""

    @SETTINGS
    @given(
        before=TEXT,
        stop=st.text(min_size=1, max_size=6),
        after=TEXT,
        sizes=CHUNKS,
        no_stop_trim=st.booleans(),
    )
    def test_output_ends_at_first_stop(
        self,
        default_tokenizer: Tokenizer,
        before: str,
        stop: str,
        after: str,
        sizes: list[int],
        no_stop_trim: bool,
    ) -> None:
        """The output is the text before the stop string's first occurrence (kept on request)."""
        ids = default_tokenizer.encode(before + stop + after)
        full = default_tokenizer.decode(ids)
        assume(stop in full)  # special-token markup in the text is skipped by decode
        checker = StopChecker([stop], no_stop_trim=no_stop_trim)
        detokenizer = IncrementalDetokenizer(default_tokenizer, stop=checker)
        deltas = run(detokenizer, chunked(ids, sizes))
        end = full.find(stop) + (len(stop) if no_stop_trim else 0)
        assert joined(deltas) == full[:end]
        assert deltas[-1] == TextDelta("", True, stop)
        assert detokenizer.finished

    @SETTINGS
    @given(text=TEXT, stops=st.lists(st.text(min_size=1, max_size=4), max_size=3), sizes=CHUNKS)
    def test_chunking_does_not_change_the_match(
        self, default_tokenizer: Tokenizer, text: str, stops: list[str], sizes: list[int]
    ) -> None:
        """Several (possibly overlapping) stop strings: same output and match for any chunking."""
        ids = default_tokenizer.encode(text)
        outcomes = set()
        for chunks in ([ids], [[i] for i in ids], chunked(ids, sizes)):
            detokenizer = IncrementalDetokenizer(default_tokenizer, stop=StopChecker(stops))
            deltas = run(detokenizer, chunks)
            outcomes.add((joined(deltas), deltas[-1].matched_stop))
        assert len(outcomes) == 1

    def test_stop_string_split_across_tokens(self, default_tokenizer: Tokenizer) -> None:
        """A stop string spread over several tokens is held back, then trimmed."""
        text = "The answer is 42.\nObservation: none"
        ids = default_tokenizer.encode(text)
        detokenizer = IncrementalDetokenizer(
            default_tokenizer, stop=StopChecker(["\nObservation:"])
        )
        deltas = run(detokenizer, [[i] for i in ids])
        assert joined(deltas) == "The answer is 42."
        assert deltas[-1].matched_stop == "\nObservation:"


class TestStopTokens:
    """A stop token id ends the request; later ids are ignored."""

    @SETTINGS
    @given(text=TEXT, position=st.integers(0, 80), no_stop_trim=st.booleans(), sizes=CHUNKS)
    def test_stop_token(
        self,
        default_tokenizer: Tokenizer,
        text: str,
        position: int,
        no_stop_trim: bool,
        sizes: list[int],
    ) -> None:
        """Output is decode(ids before the stop token), plus the token with no_stop_trim."""
        ids = default_tokenizer.encode(text)
        position = min(position, len(ids))
        ids.insert(position, 3)
        checker = StopChecker(stop_token_ids=[3], no_stop_trim=no_stop_trim)
        detokenizer = IncrementalDetokenizer(
            default_tokenizer, skip_special_tokens=False, stop=checker
        )
        deltas = run(detokenizer, chunked(ids, sizes))
        kept = ids[: position + 1] if no_stop_trim else ids[:position]
        assert joined(deltas) == default_tokenizer.decode(kept, skip_special_tokens=False)
        assert deltas[-1] == TextDelta("", True, 3)
        assert detokenizer.token_ids == ids[: position + 1]


WORDS = st.lists(st.sampled_from(["the", "server", "café", "tokens", "ok", ",", "Ωx"]), max_size=12)


@SETTINGS
@given(words=WORDS, sizes=CHUNKS)
def test_leading_space_decoder(
    metaspace_tokenizer: Tokenizer, words: list[str], sizes: list[int]
) -> None:
    """The window diff stays correct for a decoder that treats the first token specially."""
    ids = metaspace_tokenizer.encode(" ".join(words))
    deltas = run(IncrementalDetokenizer(metaspace_tokenizer), chunked(ids, sizes))
    assert joined(deltas) == metaspace_tokenizer.decode(ids)


@SETTINGS
@given(prompt=WORDS, words=WORDS.filter(bool), sizes=CHUNKS)
def test_output_continues_its_context(
    metaspace_tokenizer: Tokenizer, prompt: list[str], words: list[str], sizes: list[int]
) -> None:
    """With the prompt's last ids as context, the pieces are what the output adds to the
    prompt's text, so the first output token keeps its leading space."""
    ids = metaspace_tokenizer.encode(" ".join(["so", *prompt, *words]))
    split = len(metaspace_tokenizer.encode(" ".join(["so", *prompt])))
    assume(0 < split < len(ids))
    context, output = ids[:split][-5:], ids[split:]
    detokenizer = IncrementalDetokenizer(metaspace_tokenizer, context_ids=context)
    assert detokenizer.context_ids == context and detokenizer.read_offset == 0
    deltas = run(detokenizer, chunked(output, sizes))
    head = metaspace_tokenizer.decode(context)
    assert joined(deltas) == metaspace_tokenizer.decode(context + output)[len(head) :]
    assert detokenizer.token_ids == output


def test_context_keeps_the_first_tokens_space(metaspace_tokenizer: Tokenizer) -> None:
    """Without context a Metaspace decode drops the first token's space; with it, not."""
    context = metaspace_tokenizer.encode("the")
    output = metaspace_tokenizer.encode("the server")[len(context) :]
    alone = IncrementalDetokenizer(metaspace_tokenizer)
    after = IncrementalDetokenizer(metaspace_tokenizer, context_ids=context)
    assert joined(run(alone, [[i] for i in output])) == "server"
    assert joined(run(after, [[i] for i in output])) == " server"
