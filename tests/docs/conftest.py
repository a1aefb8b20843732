"""Fixtures of the docs test: one tokenizer cache for every stack it starts."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def docs_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer cache of every ``switchboard up`` the docs test starts (trained once)."""
    return tmp_path_factory.mktemp("docs-switchboard-cache")
