"""``switchboard up`` and the admin app: tokens, the admin child, the serving line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.tokens import NamedToken
from switchboard.supervisor.admin import AdminAccess, admin_access
from switchboard.supervisor.layout import START_GROUPS, admin_url, child_environment, stack_layout
from switchboard.supervisor.rundir import RunDirectory
from switchboard.supervisor.settings import (
    FOREIGN_ENV,
    SettingsError,
    StackSettings,
    env_name,
    load_settings,
)
from switchboard.supervisor.supervise import Supervisor


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SWITCHBOARD_* setting from the caller's environment leaks into a test."""
    for field in StackSettings.model_fields:
        monkeypatch.delenv(env_name(field), raising=False)


def opened(path: Path) -> RunDirectory:
    """A given run directory, opened (it is never removed)."""
    run_dir = RunDirectory(path)
    run_dir.open()
    return run_dir


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
            {"host": "0.0.0.0", "allow_remote": True, "admin_operator_tokens": "ops:t0ken"}
        )
        assert settings.host == "0.0.0.0"


class TestAdminChild:
    """The admin app as a child of the stack."""

    def test_admin_child(self, tmp_path: Path) -> None:
        """switchboard admin on host:admin_port, ready on /healthz, tokens in its env only."""
        secret = "s3cretAdminT0ken"
        settings = load_settings({"admin_port": "9101", "admin_operator_tokens": f"ops:{secret}"})
        env = admin_access(settings).environment()
        admin = {spec.name: spec for spec in stack_layout(settings, tmp_path, 7, env)}["admin"]
        argv = list(admin.argv)
        assert argv[argv.index("admin") - 1] == "switchboard.cli"
        assert argv[argv.index("--port") + 1] == "9101"
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert (admin.ready.kind, admin.ready.target) == ("http", "http://127.0.0.1:9101/healthz")
        assert admin.env == env and not any(secret in part for part in argv)
        assert secret not in repr(admin) and admin.socket_files == ()
        detok = argv[argv.index("--detok-control-endpoint") + 1]
        assert detok == f"ipc://{tmp_path}/detok-router-control"

    def test_starts_after_the_router_and_stops_first(self) -> None:
        """The admin app starts with the detokenizer router, once the router is ready."""
        assert START_GROUPS[0] == ("router",) and "admin" in START_GROUPS[1]
        roles = [role for group in START_GROUPS for role in group]
        assert sorted(roles) == sorted(
            ["router", "detok-router", "admin", "detokenizer", "engine", "worker"]
        )

    def test_wildcard_host_shows_loopback(self) -> None:
        """A wildcard host's console URL is its loopback address."""
        settings = load_settings(
            {"host": "0.0.0.0", "allow_remote": True, "admin_operator_tokens": "ops:t0ken"}
        )
        assert admin_url(settings) == "http://127.0.0.1:8001"


class TestServingLine:
    """The one stdout line."""

    def test_console_url_with_the_generated_token(self, tmp_path: Path) -> None:
        """With no token configured, the serving line's console URL carries it."""
        settings = load_settings({"run_dir": str(tmp_path)})
        supervisor = Supervisor(settings, opened(tmp_path))
        supervisor.admin = AdminAccess((NamedToken("console", "gen-tok"),), generated="gen-tok")
        line = supervisor.serving_line()
        assert re.fullmatch(
            r"switchboard: serving http://127\.0\.0\.1:8000 \(2 workers, 2 detokenizers, "
            r"built-in engine\); console http://127\.0\.0\.1:8001/#token=gen-tok; "
            rf"run dir {re.escape(str(tmp_path))}; Ctrl-C to stop",
            line,
        ), line

    def test_configured_tokens_are_not_shown(self, tmp_path: Path) -> None:
        """With tokens configured, the console URL has no fragment."""
        settings = load_settings({"admin_operator_tokens": "ops:secret-tok"})
        supervisor = Supervisor(settings, opened(tmp_path))
        supervisor.admin = admin_access(settings)
        line = supervisor.serving_line()
        assert "console http://127.0.0.1:8001/;" in line and "secret-tok" not in line
