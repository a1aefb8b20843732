"""Tests for GgufTokenizer (switchboard.text.gguf_tokenizer) on every vocabulary of the
llama-cpp-python sdist: ids equal llama.cpp's own test vectors, decoding is llama.cpp's
and gives the text back where llama.cpp's does, incremental detokenization agrees with
the full decode at every step, and bad paths fail naming the file."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from switchboard.text import (
    GgufTokenizer,
    IncrementalDetokenizer,
    TextCodec,
    TokenizerLoadError,
    gguf_file,
    load_tokenizer,
)
from switchboard.text.llama_runtime import LlamaUnavailable, llama_api
from tests.support import llama_vocab

pytestmark = pytest.mark.integration

CATALOGUE = llama_vocab.vocab_catalogue()
ALL_VOCABS = sorted(CATALOGUE)
VECTOR_VOCABS = [name for name in ALL_VOCABS if CATALOGUE[name]]

#: Texts of our own. None of them has a space before ``?!.,'`` (see
#: test_clean_up_removes_spaces_before_punctuation): llama.cpp's decode removes those for
#: the vocabularies that clean up spaces.
CORPUS = (
    "Hello world",
    "",
    " ",
    "  leading and trailing spaces   ",
    "repeated    spaces\tand\ttabs\nand\n\nnewlines\r\n",
    "emoji 😀 ZWJ 👩\u200d💻 family 👨\u200d👩\u200d👧\u200d👦 flag 🇺🇳 skin tone 👍🏽",
    "CJK 日本語のテキスト 中文文本 한국어 텍스트",
    "combining e\u0301 a\u0308 n\u0303, Zalgo: Z\u0335\u0321a\u0337l\u0336g\u0334o",
    # Characters most vocabularies lack: SentencePiece byte fallback, byte-level BPE bytes.
    "rare: 𝄞 𓀀 ꙮ \U0001fae0 ᚠᛇᚻ",
    "literal markup <s> </s> <|im_end|> <|endoftext|> [CLS] <bos>",
    "code: def f(x):\n    return x ** 2  # square",
)


@dataclass(frozen=True)
class Vocab:
    """One llama.cpp vocabulary of the sdist, loaded."""

    name: str
    tokenizer: GgufTokenizer


@pytest.fixture(scope="module")
def vocab(request: pytest.FixtureRequest) -> Iterator[Vocab]:
    """The vocabulary named by the test's parameter, loaded once for the module."""
    name: str = request.param
    tokenizer = load_tokenizer(llama_vocab.vocab_file(name))
    assert isinstance(tokenizer, GgufTokenizer)
    with tokenizer:
        yield Vocab(name, tokenizer)


def each_vocab(names: Sequence[str] = ALL_VOCABS) -> pytest.MarkDecorator:
    """Parametrize the ``vocab`` fixture by vocabulary name."""
    return pytest.mark.parametrize("vocab", names, indirect=True)


def llama_detokenize(tokenizer: GgufTokenizer, ids: Sequence[int], *, special: bool) -> str:
    """llama.cpp's common_detokenize of ``ids``, called here directly as the reference."""
    api = llama_api()
    vocab = tokenizer.llama_vocab
    tokens = (api.llama_token * max(len(ids), 1))(*ids)
    room = 64 * len(ids) + 1024
    buffer = ctypes.create_string_buffer(room)
    count = api.llama_detokenize(vocab, tokens, len(ids), buffer, room, False, special)
    assert 0 <= count <= room
    return buffer.raw[:count].decode("utf-8", errors="replace")


class TestLlamaCppVectors:
    """Encoding reproduces the test vectors llama.cpp's test-tokenizer-0 checks."""

    @each_vocab(VECTOR_VOCABS)
    def test_encode_matches_vectors(self, vocab: Vocab) -> None:
        """Every .inp text encodes (no BOS, no special parsing) to its .out ids."""
        vectors = llama_vocab.read_test_vectors(vocab.name)
        assert vectors
        encode = vocab.tokenizer.encode
        wrong = [
            (text, ids)
            for text, ids in vectors
            if encode(text, add_special_tokens=False, parse_special=False) != ids
        ]
        assert wrong == []


class TestRoundTrip:
    """Decoding is llama.cpp's, and gives the encoded text back where llama.cpp does."""

    @each_vocab()
    def test_decode_gives_the_text_back(self, vocab: Vocab) -> None:
        """BPE decodes give the text back; SPM ones too, with a leading space after a BOS;
        WordPiece and Unigram ones are what llama.cpp makes of the ids."""
        tokenizer = vocab.tokenizer
        for text in CORPUS:
            bare = tokenizer.encode(text, add_special_tokens=False, parse_special=False)
            with_bos = tokenizer.encode(text, parse_special=False)
            if tokenizer.vocab_type == "bpe":
                assert (tokenizer.decode(bare), tokenizer.decode(with_bos)) == (text, text)
            elif tokenizer.vocab_type == "spm":
                # The space llama.cpp put before the text is removed only from a first token.
                assert tokenizer.decode(bare) == text
                assert tokenizer.decode(with_bos) == (f" {text}" if text else "")
            else:
                assert tokenizer.decode(bare) == llama_detokenize(tokenizer, bare, special=False)

    @each_vocab()
    def test_decode_is_llama_detokenize(self, vocab: Vocab) -> None:
        """decode equals llama.cpp's common_detokenize, special tokens kept or dropped."""
        tokenizer = vocab.tokenizer
        for text in CORPUS:
            ids = tokenizer.encode(text)
            for skip in (True, False):
                expected = llama_detokenize(tokenizer, ids, special=not skip)
                assert tokenizer.decode(ids, skip_special_tokens=skip) == expected

    @each_vocab()
    def test_special_token_text_literal_or_parsed(self, vocab: Vocab) -> None:
        """Special-token text is characters without parse_special and the token with it;
        skip_special_tokens drops the token, keeping it renders its text."""
        tokenizer = vocab.tokenizer
        special = (
            tokenizer.eos_token_id
            if tokenizer.eos_token_id in tokenizer.special_token_ids
            else min(tokenizer.special_token_ids)
        )
        token_text = tokenizer.decode([special], skip_special_tokens=False)
        text = f"a{token_text}b"
        literal = tokenizer.encode(text, add_special_tokens=False, parse_special=False)
        parsed = tokenizer.encode(text, add_special_tokens=False, parse_special=True)
        assert special not in literal
        assert special in parsed
        assert token_text not in tokenizer.decode(parsed)
        assert token_text in tokenizer.decode(parsed, skip_special_tokens=False)

    @each_vocab(["gpt-2", "qwen2", "starcoder"])
    def test_clean_up_removes_spaces_before_punctuation(self, vocab: Vocab) -> None:
        """Vocabularies that clean up spaces decode " ," as ",", as llama.cpp does."""
        tokenizer = vocab.tokenizer
        ids = tokenizer.encode("a , b .", add_special_tokens=False)
        assert tokenizer.decode(ids) == llama_detokenize(tokenizer, ids, special=False)
        if vocab.name == "gpt-2":
            assert tokenizer.decode(ids) == "a, b."


class TestIncremental:
    """IncrementalDetokenizer over a GGUF tokenizer agrees with the full decode."""

    @each_vocab()
    def test_one_id_at_a_time(self, vocab: Vocab) -> None:
        """Fed one id at a time, the text so far is always a prefix of the full decode,
        and in the end is exactly the full decode."""
        tokenizer = vocab.tokenizer
        options = [(True, False), (False, False), (False, True)]
        for text in CORPUS:
            ids = tokenizer.encode(text)
            for skip, spaces in options:
                full = tokenizer.decode(
                    ids, skip_special_tokens=skip, spaces_between_special_tokens=spaces
                )
                detokenizer = IncrementalDetokenizer(
                    tokenizer, skip_special_tokens=skip, spaces_between_special_tokens=spaces
                )
                emitted = ""
                for token_id in ids:
                    emitted += detokenizer.feed([token_id]).text
                    assert full.startswith(emitted), (text, skip, spaces, emitted)
                emitted += detokenizer.finish().text
                assert emitted == full, (text, skip, spaces)


#: What llama.cpp says of some vocabularies: BOS, EOS, whether BOS is added, some
#: end-of-generation ids, a special token's id, and how the chat template starts.
FACTS: dict[str, dict[str, Any]] = {
    "llama-bpe": {
        "bos": 128000,
        "eos": 128001,
        "add_bos": True,
        "eog": {128001, 128009},
        "special": ("<|eot_id|>", 128009),
        "template": None,
    },
    "qwen2": {
        "bos": 151643,
        "eos": 151643,
        "add_bos": False,
        "eog": {151643, 151645},
        "special": ("<|im_end|>", 151645),
        "template": "{% for message in messages %}",
    },
    "llama-spm": {
        "bos": 1,
        "eos": 2,
        "add_bos": True,
        "eog": {2},
        "special": ("</s>", 2),
        "template": None,
    },
    "bert-bge": {
        "bos": 101,
        "eos": None,
        "add_bos": True,
        "eog": set(),
        "special": ("[SEP]", 102),
        "template": None,
    },
}


class TestVocabularyFacts:
    """The vocabulary facts are llama.cpp's."""

    @each_vocab(sorted(FACTS))
    def test_special_ids_and_template(self, vocab: Vocab) -> None:
        """BOS, EOS, add_bos, end-of-generation ids, special tokens and the template."""
        tokenizer, facts = vocab.tokenizer, FACTS[vocab.name]
        assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (facts["bos"], facts["eos"])
        assert tokenizer.add_bos is facts["add_bos"]
        assert facts["eog"] <= tokenizer.eog_token_ids
        text, token_id = facts["special"]
        assert tokenizer.special_tokens[text] == token_id
        assert tokenizer.token_to_id(text) == token_id
        assert token_id in tokenizer.special_token_ids
        template = tokenizer.chat_template
        if facts["template"] is None:
            assert template is None
        else:
            assert template is not None and template.startswith(facts["template"])

    @each_vocab()
    def test_max_token_chars_bounds_every_text(self, vocab: Vocab) -> None:
        """No corpus text has more than max_token_chars characters per token."""
        tokenizer = vocab.tokenizer
        assert tokenizer.max_token_chars >= 1
        for text in CORPUS:
            count = len(tokenizer.encode(text, parse_special=False))
            assert len(text) <= count * tokenizer.max_token_chars

    @each_vocab(["llama-spm"])
    def test_unknown_ids_are_ignored(self, vocab: Vocab) -> None:
        """Ids outside the vocabulary decode to nothing instead of reaching llama.cpp."""
        tokenizer = vocab.tokenizer
        hello = tokenizer.encode("Hello", add_special_tokens=False)
        assert tokenizer.decode([-1, *hello, tokenizer.vocab_size]) == "Hello"

    @each_vocab(["qwen2"])
    def test_is_a_text_codec(self, vocab: Vocab) -> None:
        """The tokenizer serves where a TextCodec is expected."""
        codec: TextCodec = vocab.tokenizer
        assert codec.vocab_size == 151936
        assert codec.source == str(llama_vocab.vocab_file("qwen2"))

    def test_eos_token_override(self) -> None:
        """eos_token names the EOS; a token not in the vocabulary is refused."""
        path = llama_vocab.vocab_file("llama-spm")
        with load_gguf(path, eos_token="<unk>") as tokenizer:
            assert tokenizer.eos_token_id == 0
        with pytest.raises(TokenizerLoadError, match="not in the vocabulary"):
            load_tokenizer(path, eos_token="<|nope|>")

    def test_close_frees_and_refuses(self) -> None:
        """After close (twice is fine), encode and decode raise instead of crashing."""
        tokenizer = load_gguf(llama_vocab.vocab_file("llama-spm"))
        tokenizer.close()
        tokenizer.close()
        assert tokenizer.closed
        with pytest.raises(RuntimeError, match="closed"):
            tokenizer.encode("x")
        with pytest.raises(RuntimeError, match="closed"):
            tokenizer.decode([1])

    def test_loading_is_quiet(self, capfd: pytest.CaptureFixture[str]) -> None:
        """Loading writes nothing to stderr: llama.cpp's log (warnings about this file's
        tokens among it) goes to the logger."""
        load_gguf(llama_vocab.vocab_file("deepseek-coder")).close()
        assert capfd.readouterr().err == ""


def load_gguf(path: Path, eos_token: str | None = None) -> GgufTokenizer:
    """``path`` loaded through load_tokenizer, checked to be a GgufTokenizer."""
    tokenizer = load_tokenizer(path, eos_token=eos_token)
    assert isinstance(tokenizer, GgufTokenizer)
    return tokenizer


class TestLoadErrors:
    """Every path that is not a loadable GGUF fails with TokenizerLoadError naming it."""

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing .gguf path is not found."""
        path = tmp_path / "model.gguf"
        with pytest.raises(TokenizerLoadError, match="not found") as caught:
            load_tokenizer(path)
        assert str(path) in str(caught.value)

    def test_not_gguf(self, tmp_path: Path) -> None:
        """A text file named .gguf is refused for its missing magic."""
        path = tmp_path / "model.gguf"
        path.write_text("not a model\n", encoding="utf-8")
        with pytest.raises(TokenizerLoadError, match="not a GGUF file") as caught:
            load_tokenizer(path)
        assert str(path) in str(caught.value)

    def test_directory(self, tmp_path: Path) -> None:
        """A directory named .gguf is not a regular file."""
        path = tmp_path / "model.gguf"
        path.mkdir()
        with pytest.raises(TokenizerLoadError, match="not a regular file"):
            load_tokenizer(path)

    @pytest.mark.parametrize("name", ["model.gguf", "model.bin"])
    def test_truncated(self, tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture) -> None:
        """Half a GGUF file (found by its magic whatever its name) fails with llama.cpp's
        reason on one line; llama.cpp's own error lines go to the logger at debug only
        (the failure says them once)."""
        whole = llama_vocab.vocab_file("llama-spm").read_bytes()
        path = tmp_path / name
        path.write_bytes(whole[: len(whole) // 2])
        with (
            caplog.at_level(logging.DEBUG, logger="switchboard.text.llama"),
            pytest.raises(TokenizerLoadError, match=r"llama\.cpp cannot load") as caught,
        ):
            load_tokenizer(path)
        message = str(caught.value)
        assert str(path) in message and "\n" not in message
        assert "failed to read" in message
        assert any("failed to read" in record.getMessage() for record in caplog.records)
        assert all(record.levelno < logging.WARNING for record in caplog.records)

    def test_binding_missing(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without llama-cpp-python the error says which extra to install."""

        def unavailable() -> None:
            raise LlamaUnavailable("llama-cpp-python is not installed")

        monkeypatch.setattr(gguf_file, "llama_api", unavailable)
        with pytest.raises(TokenizerLoadError, match=r"pip install -e '\.\[llama\]'") as caught:
            load_tokenizer(llama_vocab.vocab_file("llama-spm"))
        assert "make llama" in str(caught.value)
