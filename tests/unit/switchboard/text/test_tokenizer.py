"""Tests for load_tokenizer(PATH) (switchboard.text.tokenizer): any tokenizer.json loads,
and every failure names its path."""

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
