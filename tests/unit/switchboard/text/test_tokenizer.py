"""Tests for load_tokenizer(PATH) (switchboard.text.tokenizer): any tokenizer.json loads,
and every failure names its path; a token's own text (token_piece)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchboard.text import Tokenizer, TokenizerLoadError, load_tokenizer


class TestLoadFromPath:
    """load_tokenizer(PATH) takes any tokenizer.json and fails clearly."""

    @pytest.fixture
    def saved(self, default_tokenizer: Tokenizer, tmp_path: Path) -> Path:
        """The default tokenizer written to a model-style directory."""
        path = tmp_path / "model" / "tokenizer.json"
        path.parent.mkdir()
        default_tokenizer.backend.save(str(path))
        return path

    def test_loads_file_and_directory(self, default_tokenizer: Tokenizer, saved: Path) -> None:
        """A tokenizer.json path, or its directory, loads and encodes identically."""
        text = "Ein Zug nach München 🚆"
        for path in (saved, saved.parent, str(saved)):
            loaded = load_tokenizer(path)
            assert loaded.encode(text) == default_tokenizer.encode(text)
            assert loaded.source == str(saved)

    def test_missing_file_names_path(self, tmp_path: Path) -> None:
        """A missing file raises TokenizerLoadError naming the path."""
        missing = tmp_path / "nope" / "tokenizer.json"
        with pytest.raises(TokenizerLoadError, match="not found") as caught:
            load_tokenizer(missing)
        assert str(missing) in str(caught.value)

    @pytest.mark.parametrize("content", ["{not json", '{"model": 3}', "\udcff"])
    def test_invalid_file_names_path(self, tmp_path: Path, content: str) -> None:
        """A file that is not a tokenizer raises TokenizerLoadError naming the path."""
        path = tmp_path / "tokenizer.json"
        path.write_bytes(content.encode("utf-8", "surrogateescape"))
        with pytest.raises(TokenizerLoadError) as caught:
            load_tokenizer(path)
        assert str(path) in str(caught.value)

    def test_eos_from_config_beside_file(self, saved: Path) -> None:
        """tokenizer_config.json beside the file names the EOS token."""
        config = {"eos_token": {"content": "<|im_end|>"}}
        saved.with_name("tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        assert load_tokenizer(saved).eos_token_id == 3
        assert load_tokenizer(saved, eos_token="<|pad|>").eos_token_id == 1

    def test_unknown_eos_token_is_an_error(self, saved: Path) -> None:
        """An EOS token that is not in the vocabulary is refused."""
        with pytest.raises(TokenizerLoadError, match="not in the vocabulary"):
            load_tokenizer(saved, eos_token="<|nope|>")


class TestTokenPiece:
    """A logprob's token text: the id's own text, a word's leading space kept."""

    def test_byte_level_pieces_are_the_id_decoded_alone(self, default_tokenizer: Tokenizer) -> None:
        ids = default_tokenizer.encode("The server said: héllo, wörld 🦩 <|endoftext|>")
        for token_id in ids:
            alone = default_tokenizer.decode([token_id], skip_special_tokens=False)
            assert default_tokenizer.token_piece(token_id) == alone, token_id

    def test_a_metaspace_piece_keeps_its_space(self, metaspace_tokenizer: Tokenizer) -> None:
        """Decoded alone, a SentencePiece word loses its space; its piece does not."""
        ids = metaspace_tokenizer.encode("so the server tokens")
        pieces = [metaspace_tokenizer.token_piece(token_id) for token_id in ids]
        assert "".join(pieces) == " so the server tokens"
        words = [i for i in ids if metaspace_tokenizer.backend.id_to_token(i).startswith("▁")]
        assert len(words) >= 4, "each of the four words starts a token"
        for word in words:
            piece = metaspace_tokenizer.token_piece(word)
            assert piece.startswith(" ") and metaspace_tokenizer.decode([word]) == piece[1:]
