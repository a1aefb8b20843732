"""Fixtures shared by the unit tests: the default tokenizer, trained once per session."""

from __future__ import annotations

import pytest

from switchboard.text import Tokenizer, load_tokenizer


@pytest.fixture(scope="session")
def default_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The default tokenizer, trained into a session temp cache (never the user's cache)."""
    return load_tokenizer(None, cache_dir=tmp_path_factory.mktemp("switchboard-cache"))
