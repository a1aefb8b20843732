"""``switchboard up``'s side of the admin app's hardening: its settings refuse short admin
tokens when the stack may be reachable beyond loopback, and its ``admin_audit_log``
reaches the admin child as ``--audit-log``."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.tokens import MIN_REMOTE_TOKEN_CHARS
from switchboard.supervisor.admin import admin_access
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.settings import (
    RENAMED,
    SettingsError,
    StackSettings,
    env_name,
    load_settings,
)

LONG = "k" * MIN_REMOTE_TOKEN_CHARS
SHORT = "k" * (MIN_REMOTE_TOKEN_CHARS - 1)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SWITCHBOARD_* setting from the caller's environment leaks into a test."""
    for field in [*StackSettings.model_fields, *RENAMED]:
        monkeypatch.delenv(env_name(field), raising=False)


class TestExposedStackTokens:
    """Beyond loopback, or with allow_remote, every admin token has 24 characters or more."""

    @pytest.mark.parametrize(
        "where",
        [{"host": "0.0.0.0", "allow_remote": True}, {"allow_remote": True}],
    )
    @pytest.mark.parametrize("setting", ["admin_operator_tokens", "admin_viewer_tokens"])
    def test_short_token_is_refused(self, where: dict[str, object], setting: str) -> None:
        """A 23-character token of either role: one line naming the setting and the entry."""
        given = {"admin_operator_tokens": f"ops:{LONG}", setting: f"weak:{SHORT}", **where}
        with pytest.raises(SettingsError) as refused:
            load_settings(given)
        message = str(refused.value)
        assert f"{setting}: the token of 'weak' is shorter than 24 characters" in message
        assert SHORT not in message and "\n" not in message

    def test_long_tokens_pass(self) -> None:
        """Tokens of 24 characters are accepted beyond loopback."""
        settings = load_settings(
            {"host": "0.0.0.0", "allow_remote": True, "admin_operator_tokens": f"ops:{LONG}"}
        )
        assert settings.admin_tokens().identify(LONG) is not None

    def test_loopback_keeps_short_tokens(self) -> None:
        """A stack on loopback without allow_remote accepts a short token."""
        settings = load_settings({"admin_operator_tokens": "ops:short"})
        assert settings.admin_tokens().identify("short") is not None


class TestStackAuditLog:
    """admin_audit_log: a setting of up, handed to the admin child as --audit-log."""

    def test_passed_to_the_admin_child(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Set (here by SWITCHBOARD_ADMIN_AUDIT_LOG, ~ expanded), the admin child gets
        --audit-log with the path; unset, no such flag."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_AUDIT_LOG", "~/audit.jsonl")
        settings = load_settings({})
        assert settings.admin_audit_log == Path.home() / "audit.jsonl"
        env = admin_access(settings).environment()
        specs = {spec.name: spec for spec in stack_layout(settings, tmp_path, 7, env)}
        argv = list(specs["admin"].argv)
        assert argv[argv.index("--audit-log") + 1] == str(Path.home() / "audit.jsonl")
        monkeypatch.delenv("SWITCHBOARD_ADMIN_AUDIT_LOG")
        bare = load_settings({})
        specs = {spec.name: spec for spec in stack_layout(bare, tmp_path, 7, env)}
        assert "--audit-log" not in specs["admin"].argv
