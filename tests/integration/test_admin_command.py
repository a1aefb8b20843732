"""``switchboard admin`` by itself: its refusals, the console URL it prints with a
generated token, and a clean stop with an event stream open (it serves the router of the
module's stack)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.harness import REPO_ROOT, child_env, wait_until
from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.http_stack import free_port
from tests.integration.test_admin_api import stack

pytestmark = pytest.mark.integration

__all__ = ["stack"]


def admin_argv(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "switchboard.cli", "admin", *arguments]


def admin_env(**tokens: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_ADMIN_")}
    env.update(tokens)
    return env


class TestAdminCommand:
    """``switchboard admin`` by itself: refusals, the generated token, a clean stop."""

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            (("--host", "0.0.0.0", "--allow-remote"), "no token is configured"),
            (("--host", "0.0.0.0"), "beyond loopback"),
            (("--port", "0"), "must be 1..65535"),
            ((), "give --run-dir or --control-endpoint"),
        ],
    )
    def test_refusals(self, tmp_path: Path, arguments: tuple[str, ...], expected: str) -> None:
        """A bad setting exits 2 with one line on stderr."""
        given = arguments if arguments == () else ("--run-dir", str(tmp_path), *arguments)
        result = subprocess.run(
            admin_argv(*given),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=admin_env(),
            timeout=60,
            check=False,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1 and expected in lines[0], result.stderr

    def test_bad_token_list_is_refused_without_showing_it(self, tmp_path: Path) -> None:
        """A malformed token list is one line naming the variable, never the tokens."""
        env = admin_env(SWITCHBOARD_ADMIN_OPERATOR_TOKENS="alice:sekrit-1,just-a-secret")
        result = subprocess.run(
            admin_argv("--run-dir", str(tmp_path)),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2 and "OPERATOR_TOKENS" in result.stderr
        assert "sekrit" not in result.stderr and "just-a-secret" not in result.stderr

    def test_port_in_use(self, tmp_path: Path) -> None:
        """A port another process listens on is refused."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            result = subprocess.run(
                admin_argv("--run-dir", str(tmp_path), "--port", port),
                capture_output=True,
                text=True,
                cwd=REPO_ROOT,
                env=admin_env(),
                timeout=60,
                check=False,
            )
        assert result.returncode == 2 and "cannot listen on" in result.stderr

    def test_generated_token_and_clean_stop(self, stack: AdminStack, tmp_path: Path) -> None:
        """With no token it prints the console URL on stdout; it serves the stack's router
        and SIGTERM stops it, an open event stream included, with exit status 0."""
        port = free_port()
        out, err = tmp_path / "out", tmp_path / "err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                admin_argv("--run-dir", str(stack.run_dir), "--port", str(port)),
                stdout=stdout,
                stderr=stderr,
                cwd=REPO_ROOT,
                env=admin_env(),
                start_new_session=True,
            )
        try:
            line = wait_until(lambda: out.read_text().strip(), 30.0, "the console URL")
            match = re.fullmatch(
                rf"switchboard admin: console http://127\.0\.0\.1:{port}/#token=(\S+)", line
            )
            assert match is not None, line
            token = match.group(1)
            headers = {"Authorization": f"Bearer {token}"}
            base = f"http://127.0.0.1:{port}"
            with (
                httpx.Client(base_url=base, headers=headers, trust_env=False) as client,
                client.stream("GET", "/api/events") as events,
            ):
                assert events.status_code == 200
                lines = events.iter_lines()
                assert next(lines) == "event: snapshot"
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=15) == 0
            assert token not in err.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
