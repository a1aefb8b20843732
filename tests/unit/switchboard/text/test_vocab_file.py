"""The vocabulary file: its documented decoding rule gives the tokenizer's own text, for
the built-in tokenizer and for llama.cpp vocabularies, and it reads back as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from switchboard.text import TextCodec, load_tokenizer
from switchboard.text.vocab_file import (
    FORMAT,
    decode_ids,
    read_vocab_file,
    vocab_file,
    write_vocab_file,
)
from tests.unit.switchboard.text.test_gguf_tokenizer import Vocab, each_vocab, vocab

__all__ = ["vocab"]  # the fixture, imported so that it applies here

TEXTS = (
    "Hello, world!",
    " leading space and  two spaces",
    "Héllo wörld, 日本語, Ελληνικά, 한국어 😀🎉 ok",
    "line one\nline two\ttab",
    "<|im_start|>user\nhi<|im_end|>",
)


def _check_rule(codec: TextCodec, texts: tuple[str, ...]) -> None:
    vocab = vocab_file(codec)
    for text in texts:
        ids = codec.encode(text, add_special_tokens=False)
        for skip in (True, False):
            expected = codec.decode(ids, skip_special_tokens=skip)
            assert decode_ids(vocab, ids, skip_special_tokens=skip) == expected, (text, skip)


class TestBuiltIn:
    def test_rule_is_the_tokenizers_decode(self) -> None:
        """Joining each id's bytes (special ids skipped or kept) decodes as the tokenizer
        does, multi-byte characters split across tokens included."""
        _check_rule(load_tokenizer(None), TEXTS)

    def test_fields(self) -> None:
        codec = load_tokenizer(None)
        vocab = vocab_file(codec)
        assert vocab.format == FORMAT
        assert vocab.vocab_size == len(vocab.tokens) == codec.vocab_size == 4096
        assert vocab.eos_token_id == codec.eos_token_id == 0
        assert vocab.eog_token_ids == [0]
        assert vocab.special_token_ids == [0, 1, 2, 3]
        assert vocab.tokens[:4] == [b"<|endoftext|>", b"<|pad|>", b"<|im_start|>", b"<|im_end|>"]
        assert vocab.strip_leading_space is False

    def test_written_file_reads_back(self, tmp_path: Path) -> None:
        codec = load_tokenizer(None)
        path = tmp_path / "vocab.msgpack"
        write_vocab_file(codec, path)
        assert path.stat().st_mode & 0o777 == 0o600
        assert read_vocab_file(path) == vocab_file(codec)
        # Plain MessagePack: a map of the documented keys, the tokens as bin.
        raw = msgspec.msgpack.decode(path.read_bytes())
        assert sorted(raw) == sorted(
            [
                "format",
                "source",
                "vocab_size",
                "eos_token_id",
                "eog_token_ids",
                "special_token_ids",
                "strip_leading_space",
                "tokens",
            ]
        )
        assert isinstance(raw["tokens"][5], bytes)

    def test_not_a_vocab_file(self, tmp_path: Path) -> None:
        path = tmp_path / "v"
        path.write_bytes(msgspec.msgpack.encode({"format": "other/1"}))
        with pytest.raises(ValueError, match="not a vocabulary file"):
            read_vocab_file(path)

    def test_cli_writes_it(self, tmp_path: Path) -> None:
        out = tmp_path / "v.msgpack"
        vocab = [sys.executable, "-m", "switchboard.cli", "vocab"]
        done = subprocess.run(
            [*vocab, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert read_vocab_file(out).vocab_size == 4096
        bad = subprocess.run(
            [*vocab, "--tokenizer", str(tmp_path / "x")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert bad.returncode == 2  # --out missing: a usage error
        missing = subprocess.run(
            [*vocab, "--tokenizer", str(tmp_path / "x"), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert missing.returncode == 1
        assert "not found" in missing.stderr


@pytest.mark.integration
class TestGguf:
    @each_vocab(["llama-spm", "llama-bpe", "phi-3", "gpt-2", "qwen2"])
    def test_rule_is_llama_cpps_decode(self, vocab: Vocab) -> None:
        """SentencePiece vocabularies say strip_leading_space and the rule still gives
        llama.cpp's text; byte-level ones do not."""
        _check_rule(vocab.tokenizer, TEXTS[:4])
        expected_strip = vocab.name in ("llama-spm", "phi-3")
        assert vocab_file(vocab.tokenizer).strip_leading_space is expected_strip
