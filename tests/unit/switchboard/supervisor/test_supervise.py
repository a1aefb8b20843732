"""The supervisor's serving line: the one stdout line, the console URL in it."""

from __future__ import annotations

import re
from pathlib import Path

from app.tokens import NamedToken
from switchboard.supervisor.admin import AdminAccess, admin_access
from switchboard.supervisor.rundir import RunDirectory
from switchboard.supervisor.settings import load_settings
from switchboard.supervisor.supervise import Supervisor


def opened(path: Path) -> RunDirectory:
    """A given run directory, opened (it is never removed)."""
    run_dir = RunDirectory(path)
    run_dir.open()
    return run_dir


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

    def test_the_logged_line_leaves_the_generated_token_out(self, tmp_path: Path) -> None:
        """``with_token=False`` (what a detached supervisor prints into its log) says a
        token was generated and does not show it."""
        settings = load_settings({"run_dir": str(tmp_path)})
        supervisor = Supervisor(settings, opened(tmp_path))
        supervisor.admin = AdminAccess((NamedToken("console", "gen-tok"),), generated="gen-tok")
        line = supervisor.serving_line(with_token=False)
        assert "console http://127.0.0.1:8001/ (token generated, not logged);" in line
        assert "gen-tok" not in line

    def test_configured_tokens_are_not_shown(self, tmp_path: Path) -> None:
        """With tokens configured, the console URL has no fragment."""
        settings = load_settings({"admin_operator_tokens": "ops:secret-tok"})
        supervisor = Supervisor(settings, opened(tmp_path))
        supervisor.admin = admin_access(settings)
        line = supervisor.serving_line()
        assert "console http://127.0.0.1:8001/;" in line and "secret-tok" not in line
