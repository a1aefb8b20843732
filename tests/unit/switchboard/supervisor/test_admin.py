"""``switchboard up`` and the admin app's tokens: configured, generated, refused, and kept
from the children."""

from __future__ import annotations

import pytest

from app.tokens import NamedToken
from switchboard.supervisor.admin import admin_access
from switchboard.supervisor.layout import child_environment
from switchboard.supervisor.settings import FOREIGN_ENV, SettingsError, load_settings


class TestAdminTokens:
    """admin_operator_tokens and admin_viewer_tokens."""

    def test_configured_tokens_pass_through(self) -> None:
        """Configured lists reach the admin app's environment as given; nothing generated."""
        settings = load_settings(
            {"admin_operator_tokens": "alice:tok1,ci:tok2", "admin_viewer_tokens": "g:tok3"}
        )
        access = admin_access(settings)
        assert access.generated is None
        assert access.environment() == {
            "SWITCHBOARD_ADMIN_OPERATOR_TOKENS": "alice:tok1,ci:tok2",
            "SWITCHBOARD_ADMIN_VIEWER_TOKENS": "g:tok3",
        }
        assert access.console_url("http://127.0.0.1:8001") == "http://127.0.0.1:8001/"

    def test_none_configured_generates_an_operator_token(self) -> None:
        """With no token, a fresh operator token named console, shown in the console URL."""
        first, second = admin_access(load_settings({})), admin_access(load_settings({}))
        assert first.generated and first.generated != second.generated
        assert first.operators == (NamedToken("console", first.generated),)
        env = first.environment()
        assert env == {"SWITCHBOARD_ADMIN_OPERATOR_TOKENS": f"console:{first.generated}"}
        url = first.console_url("http://127.0.0.1:8001")
        assert url == f"http://127.0.0.1:8001/#token={first.generated}"
        assert first.generated not in repr(first)

    def test_viewer_tokens_alone_generate_nothing(self) -> None:
        """Configured viewers count as configured: no operator token is made up."""
        access = admin_access(load_settings({"admin_viewer_tokens": "g:tok3"}))
        assert access.generated is None and access.operators == ()

    def test_environment_variables(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The token settings come from SWITCHBOARD_ADMIN_*_TOKENS like any setting."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", "ops:from-env")
        assert admin_access(load_settings({})).operators == (NamedToken("ops", "from-env"),)

    @pytest.mark.parametrize(
        "given",
        [
            {"admin_operator_tokens": "no-colon-s3cret"},
            {"admin_operator_tokens": "a:s3cret", "admin_viewer_tokens": "a:other-s3cret"},
            {"admin_operator_tokens": "a:s3cret", "admin_viewer_tokens": "b:s3cret"},
        ],
    )
    def test_bad_lists_are_refused_without_the_tokens(self, given: dict[str, str]) -> None:
        """A malformed or clashing list is a one-line refusal that never shows a token."""
        with pytest.raises(SettingsError) as caught:
            load_settings(given)
        message = str(caught.value)
        assert "\n" not in message and "s3cret" not in message

    def test_settings_repr_hides_tokens(self) -> None:
        """The settings' repr (in a traceback, say) hides the tokens."""
        settings = load_settings({"admin_operator_tokens": "a:very-s3cret"})
        assert "very-s3cret" not in repr(settings)

    def test_operator_commands_variables_are_foreign(self) -> None:
        """SWITCHBOARD_ADMIN_URL and _TOKEN belong to the operator commands, not to up."""
        assert {"SWITCHBOARD_ADMIN_URL", "SWITCHBOARD_ADMIN_TOKEN"} <= FOREIGN_ENV

    def test_operator_token_never_reaches_a_child(self) -> None:
        """up accepts the operator CLI's variables but hands them to no child."""
        env = child_environment(
            {"SWITCHBOARD_ADMIN_TOKEN": "s3cret", "SWITCHBOARD_ADMIN_URL": "http://x", "A": "1"}
        )
        assert "SWITCHBOARD_ADMIN_TOKEN" not in env and "SWITCHBOARD_ADMIN_URL" not in env
        assert env["A"] == "1"

    def test_beyond_loopback_needs_configured_tokens(self) -> None:
        """A remote host with no tokens is refused rather than given a generated one."""
        with pytest.raises(SettingsError, match="needs configured tokens"):
            load_settings({"host": "0.0.0.0", "allow_remote": True})
        settings = load_settings(
            {
                "host": "0.0.0.0",
                "allow_remote": True,
                "admin_operator_tokens": "ops:remote-t0ken-of-24-chars",
            }
        )
        assert settings.host == "0.0.0.0"
