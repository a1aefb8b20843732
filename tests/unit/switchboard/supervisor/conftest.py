"""Fixtures of the supervisor tests: no SWITCHBOARD_* setting from the caller's environment."""

from __future__ import annotations

import pytest

from switchboard.supervisor.settings import RENAMED, StackSettings, env_name


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SWITCHBOARD_* setting (nor an old name of one) from the caller's environment leaks
    into a test."""
    for field in [*StackSettings.model_fields, *RENAMED]:
        monkeypatch.delenv(env_name(field), raising=False)
