"""Vocabulary sources: a GGUF file's tokenizer keys copied as typed, and Switchboard's
built-in tokenizer as a GGUF gpt2 vocabulary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import pytest
from gguf import GGUFValueType, TokenType

from switchboard.models.builtin_vocab import BuiltinVocab, vocabulary_from_tokenizer_json
from switchboard.models.vocab import GGUFVocab, VocabError, Vocabulary, file_digest
from switchboard.text import Tokenizer
from tests.support.llama_vocab import vocab_file


def write_vocab_file(path: Path, *, with_tokens: bool = True) -> Path:
    """A vocabulary-only GGUF file: tokenizer keys, a chat template and keys of other kinds."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("made-up")
    writer.add_context_length(128)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    if with_tokens:
        writer.add_token_list(["a", "b", "ab", "\xff\xfe"])
        writer.add_token_types([1, 1, 1, 3])
        writer.add_token_merges(["a b"])
    writer.add_eos_token_id(3)
    writer.add_add_bos_token(False)
    writer.add_chat_template("{{ messages }}")
    writer.add_string("tokenizer.huggingface.json", "{}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


def array(vocab: Vocabulary, key: str) -> list[Any]:
    """The array value of ``key`` in ``vocab``."""
    entry = vocab.find(key)
    assert entry is not None and isinstance(entry.value, list), key
    return entry.value


class TestGGUFVocab:
    """Every tokenizer.ggml.* key and the chat template, with the file's types."""

    def test_copies_tokenizer_keys_and_template(self, tmp_path: Path) -> None:
        """The copy has exactly the tokenizer keys and the template, typed as stored."""
        vocab = GGUFVocab(write_vocab_file(tmp_path / "ggml-vocab-made-up.gguf")).load()
        entries = {entry.key: entry for entry in vocab.entries}
        assert set(entries) == {
            "tokenizer.ggml.model",
            "tokenizer.ggml.pre",
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges",
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.add_bos_token",
            "tokenizer.chat_template",
        }
        tokens = entries["tokenizer.ggml.tokens"]
        assert tokens.value == [b"a", b"b", b"ab", "\xff\xfe".encode()]
        assert (tokens.type, tokens.sub_type) == (GGUFValueType.ARRAY, GGUFValueType.STRING)
        assert entries["tokenizer.ggml.token_type"].sub_type == GGUFValueType.INT32
        assert entries["tokenizer.ggml.eos_token_id"].value == 3
        assert entries["tokenizer.ggml.eos_token_id"].type == GGUFValueType.UINT32
        assert entries["tokenizer.ggml.add_bos_token"].value is False
        assert entries["tokenizer.chat_template"].value == b"{{ messages }}"
        assert vocab.size == 4

    def test_name_and_digest(self, tmp_path: Path) -> None:
        """The name is the file's, without llama.cpp's prefix; the digest its SHA-256."""
        path = write_vocab_file(tmp_path / "ggml-vocab-Made_Up.gguf")
        source = GGUFVocab(path)
        assert source.name == "made-up"
        assert source.digest() == file_digest(path)
        assert len(source.digest()) == 64

    def test_not_a_gguf_file(self, tmp_path: Path) -> None:
        """A file that is not GGUF is a VocabError naming it."""
        path = tmp_path / "notes.gguf"
        path.write_text("not a model\n" * 10)
        with pytest.raises(VocabError, match="not a GGUF file"):
            GGUFVocab(path).load()

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is a VocabError from digest and from load."""
        source = GGUFVocab(tmp_path / "absent.gguf")
        with pytest.raises(VocabError, match=r"absent\.gguf"):
            source.digest()
        with pytest.raises(VocabError, match=r"absent\.gguf"):
            source.load()

    def test_no_tokens(self, tmp_path: Path) -> None:
        """A GGUF file without tokenizer.ggml.tokens gives no vocabulary."""
        path = write_vocab_file(tmp_path / "empty.gguf", with_tokens=False)
        with pytest.raises(VocabError, match=r"tokenizer\.ggml\.tokens"):
            GGUFVocab(path).load()

    def test_llama_spm(self) -> None:
        """llama.cpp's llama-spm vocabulary: 32 000 tokens with scores and types, BOS 1
        and EOS 2, BOS added (skips without the llama-cpp-python sdist)."""
        vocab = GGUFVocab(vocab_file("llama-spm")).load()
        entries = {entry.key: entry.value for entry in vocab.entries}
        assert vocab.size == 32000
        assert entries["tokenizer.ggml.model"] == b"llama"
        assert len(array(vocab, "tokenizer.ggml.scores")) == 32000
        assert (entries["tokenizer.ggml.bos_token_id"], entries["tokenizer.ggml.eos_token_id"]) == (
            1,
            2,
        )
        assert entries["tokenizer.ggml.add_bos_token"] is True


class TestBuiltinVocab:
    """The built-in byte-level BPE as llama.cpp's gpt2 model with the gpt-2 pre-tokenizer."""

    def test_tokens_types_and_merges(self, default_tokenizer: Tokenizer) -> None:
        """Tokens in id order, the special tokens as control tokens, every merge, EOS
        (also BOS) <|endoftext|>, padding <|pad|>, nothing added to prompts."""
        text = default_tokenizer.backend.to_str()
        vocab = vocabulary_from_tokenizer_json(text)
        entries = {entry.key: entry.value for entry in vocab.entries}
        size = default_tokenizer.backend.get_vocab_size()
        assert vocab.size == size
        assert entries["tokenizer.ggml.model"] == "gpt2"
        assert entries["tokenizer.ggml.pre"] == "gpt-2"
        tokens = array(vocab, "tokenizer.ggml.tokens")
        for token_id in (0, 1, 100, size - 1):
            token = default_tokenizer.backend.id_to_token(token_id)
            assert token is not None and tokens[token_id] == token.encode()
        types = array(vocab, "tokenizer.ggml.token_type")
        specials = set(default_tokenizer.special_tokens.values())
        assert {i for i, kind in enumerate(types) if kind == TokenType.CONTROL} == specials
        merges = json.loads(text)["model"]["merges"]
        assert len(array(vocab, "tokenizer.ggml.merges")) == len(merges)
        eos = default_tokenizer.eos_token_id
        assert (
            entries["tokenizer.ggml.eos_token_id"] == entries["tokenizer.ggml.bos_token_id"] == eos
        )
        assert (
            entries["tokenizer.ggml.padding_token_id"]
            == default_tokenizer.special_tokens["<|pad|>"]
        )
        assert entries["tokenizer.ggml.add_bos_token"] is False

    def test_digest_is_the_tokenizer_json(self, tmp_path: Path) -> None:
        """The digest follows the tokenizer's JSON: the same for two sources on one cache."""
        first, second = BuiltinVocab(tmp_path), BuiltinVocab(tmp_path)
        assert first.digest() == second.digest()
        assert first.name == "builtin"
        assert isinstance(first.load(), Vocabulary)

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda doc: doc["model"].update(type="WordPiece"), "not a byte-level BPE"),
            (lambda doc: doc["model"]["vocab"].update(far=10**6), "without gaps"),
        ],
        ids=["not-bpe", "gap"],
    )
    def test_refused_tokenizers(
        self, default_tokenizer: Tokenizer, change: object, message: str
    ) -> None:
        """A tokenizer that is not a byte-level BPE, or has gaps in its ids, is refused."""
        document = json.loads(default_tokenizer.backend.to_str())
        change(document)  # type: ignore[operator]
        with pytest.raises(VocabError, match=message):
            vocabulary_from_tokenizer_json(json.dumps(document))

    def test_missing_eos(self, default_tokenizer: Tokenizer) -> None:
        """An EOS token the vocabulary lacks is refused by name."""
        with pytest.raises(VocabError, match="<eos>"):
            vocabulary_from_tokenizer_json(default_tokenizer.backend.to_str(), eos="<eos>")
