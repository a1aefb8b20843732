"""The admin app's settings: tokens from the environment, loopback unless allowed."""

from __future__ import annotations

import pytest

from app.settings import AdminSettings
from app.tokens import MIN_REMOTE_TOKEN_CHARS, NamedToken, Principal, TokenTable

ENDPOINT = "ipc:///tmp/sb-unit/router-control"
#: A token long enough for an app reachable beyond loopback.
LONG = "t" * MIN_REMOTE_TOKEN_CHARS


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No admin token from the caller's environment leaks into a test."""
    for name in ("OPERATOR_TOKENS", "VIEWER_TOKENS", "AUDIT_LOG"):
        monkeypatch.delenv(f"SWITCHBOARD_ADMIN_{name}", raising=False)


class TestAdminSettings:
    """The admin app's settings: tokens from the environment, loopback unless allowed."""

    def test_defaults(self) -> None:
        """127.0.0.1:8001, a 0.25 s poll, no tokens."""
        settings = AdminSettings(control_endpoint=ENDPOINT)
        assert (settings.host, settings.port, settings.poll_interval_s) == ("127.0.0.1", 8001, 0.25)
        assert settings.tokens.empty

    def test_tokens_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """SWITCHBOARD_ADMIN_OPERATOR_TOKENS and _VIEWER_TOKENS are read and parsed."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", "alice:tok1,ci:tok2")
        monkeypatch.setenv("SWITCHBOARD_ADMIN_VIEWER_TOKENS", "graf:tok3")
        settings = AdminSettings(control_endpoint=ENDPOINT)
        assert settings.tokens.identify("tok2") == Principal("ci", "operator")
        assert settings.tokens.identify("tok3") == Principal("graf", "viewer")
        assert "tok1" not in repr(settings) and "tok1" not in str(settings.model_dump())

    def test_remote_host_needs_opt_in_and_tokens(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Beyond loopback: refused without allow_remote, and without a token even with it."""
        with pytest.raises(ValueError, match="pass --allow-remote"):
            AdminSettings(control_endpoint=ENDPOINT, host="0.0.0.0")
        with pytest.raises(ValueError, match="no token is configured"):
            AdminSettings(control_endpoint=ENDPOINT, host="0.0.0.0", allow_remote=True)
        monkeypatch.setenv("SWITCHBOARD_ADMIN_VIEWER_TOKENS", f"graf:{LONG}")
        settings = AdminSettings(control_endpoint=ENDPOINT, host="0.0.0.0", allow_remote=True)
        assert not settings.tokens.empty

    def test_remote_control_endpoint_needs_opt_in(self) -> None:
        """A control endpoint beyond loopback needs allow_remote, as the router's do."""
        with pytest.raises(ValueError, match="beyond loopback"):
            AdminSettings(control_endpoint="tcp://10.0.0.1:5555")

    def test_bad_token_list_is_a_settings_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A malformed list fails validation, naming the variable."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", "no-name-here")
        with pytest.raises(ValueError, match="SWITCHBOARD_ADMIN_OPERATOR_TOKENS"):
            AdminSettings(control_endpoint=ENDPOINT)

    def test_with_tokens(self) -> None:
        """with_tokens gives a copy accepting a generated token; the original is unchanged."""
        settings = AdminSettings(control_endpoint=ENDPOINT)
        changed = settings.with_tokens(TokenTable((NamedToken("console", "gen"),)))
        assert changed.tokens.identify("gen") == Principal("console", "operator")
        assert settings.tokens.empty


class TestExposedTokens:
    """Reachable beyond loopback, the app refuses short tokens; on loopback it keeps them."""

    @pytest.mark.parametrize(
        ("where", "why"),
        [
            ({"host": "0.0.0.0", "allow_remote": True}, "listens on 0.0.0.0"),
            ({"allow_remote": True}, "has --allow-remote"),
        ],
    )
    @pytest.mark.parametrize("variable", ["OPERATOR_TOKENS", "VIEWER_TOKENS"])
    def test_short_tokens_are_refused_when_exposed(
        self, monkeypatch: pytest.MonkeyPatch, where: dict[str, object], why: str, variable: str
    ) -> None:
        """A 23-character token of either role is refused in one line naming the variable,
        the entry, the minimum and why; never showing the token."""
        short = "s" * (MIN_REMOTE_TOKEN_CHARS - 1)
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", f"alice:{LONG}")
        monkeypatch.setenv(f"SWITCHBOARD_ADMIN_{variable}", f"weak:{short}")
        with pytest.raises(ValueError) as refused:
            AdminSettings(control_endpoint=ENDPOINT, **where)  # type: ignore[arg-type]
        message = str(refused.value.errors()[0]["msg"])  # type: ignore[attr-defined]
        assert f"SWITCHBOARD_ADMIN_{variable}: the token of 'weak' is shorter than 24" in message
        assert why in message and "\n" not in message and short not in message

    def test_long_tokens_are_accepted_when_exposed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Tokens of at least 24 characters pass beyond loopback."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", f"alice:{LONG}")
        settings = AdminSettings(control_endpoint=ENDPOINT, host="0.0.0.0", allow_remote=True)
        assert settings.exposed and settings.tokens.identify(LONG) == Principal("alice", "operator")

    def test_short_tokens_are_kept_on_loopback(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On loopback without allow_remote, a short token is accepted."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_OPERATOR_TOKENS", "a:short")
        settings = AdminSettings(control_endpoint=ENDPOINT)
        assert not settings.exposed and settings.tokens.identify("short") is not None


class TestAuditLogSetting:
    """audit_log: unset by default, from the environment."""

    def test_default_and_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No file unless SWITCHBOARD_ADMIN_AUDIT_LOG names one."""
        assert AdminSettings(control_endpoint=ENDPOINT).audit_log is None
        monkeypatch.setenv("SWITCHBOARD_ADMIN_AUDIT_LOG", "/var/log/sb/audit.jsonl")
        assert str(AdminSettings(control_endpoint=ENDPOINT).audit_log) == "/var/log/sb/audit.jsonl"
