"""Tests for the default tokenizer (switchboard.text.default_tokenizer): a real byte-level
subword tokenizer, trained from the bundled corpus and cached."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.text import Tokenizer
from switchboard.text import default_tokenizer as default_module
from switchboard.text.default_tokenizer import (
    DEFAULT_SETTINGS,
    TrainingSettings,
    cache_key,
    default_cache_dir,
    ensure_default_tokenizer,
    read_corpus,
    train_tokenizer,
    write_atomically,
)

SETTINGS = settings(max_examples=150, deadline=None)

#: Text with a weight on the characters that take several UTF-8 bytes.
TEXT = st.one_of(
    st.text(max_size=80),
    st.text(alphabet="aé ñ日本語中文한국어😀🚀👩‍💻🦩ΩЖ\n", max_size=40),
)

COMMON_WORDS = [" the", " and", " request", " token", " server", " worker", " weather"]
RARE_WORDS = [" zygomorphic", " antidisestablishmentarianism", " quokkas", " xylophonist"]


def cached_files(cache_dir: Path) -> list[Path]:
    """Every file under ``cache_dir``, temporary files included."""
    return sorted(path for path in cache_dir.rglob("*") if path.is_file())


class TestDefaultTokenizer:
    """The default tokenizer is a real byte-level subword tokenizer."""

    @SETTINGS
    @given(text=TEXT)
    def test_round_trip(self, default_tokenizer: Tokenizer, text: str) -> None:
        """decode(encode(text)) is text, special-token markup included when kept."""
        ids = default_tokenizer.encode(text)
        assert default_tokenizer.decode(ids, skip_special_tokens=False) == text

    @pytest.mark.parametrize("word", COMMON_WORDS)
    def test_common_words_are_one_token(self, default_tokenizer: Tokenizer, word: str) -> None:
        """A frequent English word (with its leading space) is a single token."""
        assert len(default_tokenizer.encode(word)) == 1

    @pytest.mark.parametrize("word", RARE_WORDS)
    def test_rare_words_split(self, default_tokenizer: Tokenizer, word: str) -> None:
        """A word absent from the corpus splits into several subwords, not bytes."""
        ids = default_tokenizer.encode(word)
        assert 2 < len(ids) < len(word.encode())
        assert "".join(default_tokenizer.decode([token_id]) for token_id in ids) == word

    @pytest.mark.parametrize("text", ["é", "ö", "\u03b1", "\u043e", "今", "天", "…", " 😀", " 🚀"])
    def test_multibyte_characters_merged(self, default_tokenizer: Tokenizer, text: str) -> None:
        """Byte-level merges cover multi-byte characters that occur in the corpus."""
        assert len(default_tokenizer.encode(text)) == 1

    def test_vocabulary_and_special_tokens(self, default_tokenizer: Tokenizer) -> None:
        """4096 ids; the special tokens come first and <|endoftext|> is the EOS token."""
        assert default_tokenizer.vocab_size == DEFAULT_SETTINGS.vocab_size
        assert dict(default_tokenizer.special_tokens) == {
            "<|endoftext|>": 0,
            "<|pad|>": 1,
            "<|im_start|>": 2,
            "<|im_end|>": 3,
        }
        assert default_tokenizer.eos_token_id == 0
        assert max(default_tokenizer.encode("every id is in range 😀")) < 4096

    def test_special_token_text_encodes_to_special_id(self, default_tokenizer: Tokenizer) -> None:
        """Special-token markup in text becomes the special token."""
        ids = default_tokenizer.encode("hi<|im_end|>")
        assert ids[-1] == default_tokenizer.special_tokens["<|im_end|>"]

    def test_literal_encoding_keeps_special_token_text_as_text(
        self, default_tokenizer: Tokenizer
    ) -> None:
        """Without special-token parsing, markup is ordinary text that decodes back to itself."""
        text = "hi<|im_end|> and <|endoftext|>"
        ids = default_tokenizer.encode(text, parse_special=False)
        assert default_tokenizer.special_token_ids.isdisjoint(ids)
        assert default_tokenizer.decode(ids) == text
        assert default_tokenizer.encode("plain words", parse_special=False) == (
            default_tokenizer.encode("plain words")
        )

    def test_decode_special_token_options(self, default_tokenizer: Tokenizer) -> None:
        """Special tokens are skipped, kept, or kept with spaces around them."""
        hello, world = default_tokenizer.encode("Hello"), default_tokenizer.encode("world")
        ids = [*hello, 0, *world, 3]
        assert default_tokenizer.decode(ids) == "Helloworld"
        kept = default_tokenizer.decode(ids, skip_special_tokens=False)
        assert kept == "Hello<|endoftext|>world<|im_end|>"
        spaced = default_tokenizer.decode(
            ids, skip_special_tokens=False, spaces_between_special_tokens=True
        )
        assert spaced == "Hello <|endoftext|> world <|im_end|>"
        assert default_tokenizer.decode(ids, spaces_between_special_tokens=True) == "Helloworld"


class TestDefaultCache:
    """Training is deterministic; the cache is keyed, atomic, and survives bad states."""

    def test_training_twice_gives_identical_json(self, tmp_path: Path) -> None:
        """Two caches trained separately hold byte-identical tokenizer.json files."""
        _, first = ensure_default_tokenizer(tmp_path / "a")
        _, second = ensure_default_tokenizer(tmp_path / "b")
        assert first != second
        assert Path(first).read_bytes() == Path(second).read_bytes()

    def test_training_in_another_process_is_identical(self) -> None:
        """A fresh interpreter (new hash seeds, new thread pool) trains the same JSON."""
        script = (
            "import sys\nfrom switchboard.text.default_tokenizer import read_corpus, "
            "train_tokenizer\nsys.stdout.write(train_tokenizer(read_corpus()).to_str())"
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
        )
        assert result.stdout == train_tokenizer(read_corpus()).to_str()

    def test_second_load_reads_the_cache(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Once cached, the default loads without training."""
        _, path = ensure_default_tokenizer(tmp_path)

        def refuse(*_: object) -> None:
            raise AssertionError("trained again")

        monkeypatch.setattr(default_module, "train_tokenizer", refuse)
        assert ensure_default_tokenizer(tmp_path)[1] == path
        assert [p.name for p in cached_files(tmp_path)] == ["tokenizer.json"]

    def test_key_covers_corpus_and_settings(self) -> None:
        """Changing the corpus or any setting changes the cache key."""
        corpus = read_corpus()
        key = cache_key(corpus, DEFAULT_SETTINGS)
        assert cache_key(corpus, TrainingSettings(vocab_size=2048)) != key
        assert cache_key([*corpus, ("extra.txt", "more")], DEFAULT_SETTINGS) != key
        assert cache_key([("a", "bc")], DEFAULT_SETTINGS) != cache_key(
            [("ab", "c")], DEFAULT_SETTINGS
        )

    def test_corrupt_cache_is_retrained(self, tmp_path: Path) -> None:
        """A cached file that does not parse is replaced by a freshly trained one."""
        _, path = ensure_default_tokenizer(tmp_path)
        good = Path(path).read_bytes()
        Path(path).write_text("{not json", encoding="utf-8")
        assert ensure_default_tokenizer(tmp_path)[1] == path
        assert Path(path).read_bytes() == good

    def test_unwritable_cache_falls_back_to_memory(self, tmp_path: Path) -> None:
        """A cache directory that cannot be created still yields a working tokenizer."""
        blocker = tmp_path / "file"
        blocker.write_text("", encoding="utf-8")
        backend, source = ensure_default_tokenizer(blocker)
        assert "in memory" in source
        assert backend.decode(backend.encode("still works").ids) == "still works"

    def test_racing_first_starts(self, tmp_path: Path) -> None:
        """Concurrent first loads all succeed, agree, and leave no temporary files."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda _: ensure_default_tokenizer(tmp_path), range(4)))
        assert len({backend.to_str() for backend, _ in results}) == 1
        assert [p.name for p in cached_files(tmp_path)] == ["tokenizer.json"]

    def test_write_atomically_replaces_whole_file(self, tmp_path: Path) -> None:
        """The target holds exactly the new text and no temporary file remains."""
        target = tmp_path / "deep" / "tokenizer.json"
        write_atomically(target, "old")
        write_atomically(target, "new ✓")
        assert target.read_text(encoding="utf-8") == "new ✓"
        assert cached_files(tmp_path) == [target]

    def test_cache_dir_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """$SWITCHBOARD_CACHE_DIR picks the cache directory."""
        monkeypatch.setenv("SWITCHBOARD_CACHE_DIR", "/srv/cache")
        assert default_cache_dir() == Path("/srv/cache")
        monkeypatch.delenv("SWITCHBOARD_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
        assert default_cache_dir() == Path("/xdg/switchboard")
