"""Tests for the text package's public names: each module's ``__all__`` is honest, and
router_core never imports the text layer."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest


class TestExports:
    """The text package's public names are honest and it stays out of router_core."""

    @pytest.mark.parametrize(
        "name",
        [
            "switchboard.text",
            "switchboard.text.chat_template",
            "switchboard.text.chat_template_source",
            "switchboard.text.codec",
            "switchboard.text.default_tokenizer",
            "switchboard.text.gguf_file",
            "switchboard.text.gguf_tokenizer",
            "switchboard.text.incremental",
            "switchboard.text.llama_runtime",
            "switchboard.text.stop",
            "switchboard.text.template_bounds",
            "switchboard.text.template_sandbox",
            "switchboard.text.tokenizer",
            "switchboard.text.vocab_file",
        ],
    )
    def test_all_names_exist(self, name: str) -> None:
        """Every name in the module's __all__ is defined there, once."""
        module = importlib.import_module(name)
        assert [item for item in module.__all__ if not hasattr(module, item)] == []
        assert len(set(module.__all__)) == len(module.__all__)

    def test_router_core_does_not_import_text(self) -> None:
        """No router_core source imports switchboard.text (the text layer sits above it)."""
        root = Path(__file__).resolve().parents[4] / "router_core"
        offenders = [
            str(path)
            for path in root.rglob("*.py")
            if "switchboard.text" in path.read_text(encoding="utf-8")
        ]
        assert offenders == []
