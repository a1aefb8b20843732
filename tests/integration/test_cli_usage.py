"""The ``switchboard`` console script refusing a command line, as an operator types it.

Each test runs the installed script (``.venv/bin/switchboard``, beside the interpreter)
in a process of its own and checks its one stderr line and its exit status. No stack is
needed: every refusal here happens before a request is sent or a process started; the
operator commands are pointed at a port nobody listens on, so a refusal that came from
the network instead (exit 3, "cannot reach") fails the test.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from router_core.version import package_version
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT
from tests.integration.harness.supervisor import stack_env

pytestmark = pytest.mark.integration

EXIT_USAGE = 2


def switchboard(
    binary: str, *words: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``switchboard WORDS`` as an operator runs it, without their SWITCHBOARD_* settings."""
    return subprocess.run(
        [binary, *words],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else stack_env(Path("/nonexistent-cache")),
        timeout=60,
        check=False,
    )


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a command that must exit 2 having printed nothing else."""
    assert done.returncode == EXIT_USAGE, f"exit {done.returncode}: {done.stderr}"
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def nowhere() -> str:
    """An admin URL nobody answers at."""
    return f"--url=http://127.0.0.1:{free_port()}"


class TestMisspeltFlags:
    """An unknown flag is named with the subcommand and the closest flag."""

    def test_pause_modee(self, switchboard_bin: str, nowhere: str) -> None:
        """``pause --modee in_place``: pause's error, suggesting --mode."""
        line = refusal(switchboard(switchboard_bin, "pause", "--modee", "in_place", nowhere))
        assert line == (
            "switchboard pause: error: unrecognized arguments: --modee in_place "
            "(did you mean --mode?) (see --help)"
        )

    def test_up_wokers(self, switchboard_bin: str) -> None:
        """``up --wokers 2``: up's error, suggesting --workers, nothing started."""
        line = refusal(switchboard(switchboard_bin, "up", "--wokers", "2"))
        assert line == (
            "switchboard up: error: unrecognized arguments: --wokers 2 "
            "(did you mean --workers?) (see --help)"
        )

    def test_misspelt_command(self, switchboard_bin: str) -> None:
        """A command that does not exist is refused with the closest one."""
        line = refusal(switchboard(switchboard_bin, "wokers"))
        assert line == (
            "switchboard: error: unknown command 'wokers' (did you mean workers?) (see --help)"
        )


class TestOperatorArguments:
    """The operator commands' values are held to the server's rules before sending."""

    @pytest.mark.parametrize("value", ["0", "700", "600.5"])
    def test_barrier_timeout_out_of_range(
        self, switchboard_bin: str, nowhere: str, value: str
    ) -> None:
        """0 and 700 alike: a local usage error naming the range the admin API accepts."""
        line = refusal(switchboard(switchboard_bin, "pause", "--timeout", value, nowhere))
        assert line == (
            "switchboard pause: error: argument --timeout-s/--timeout: must be more than 0 "
            f"and at most 600 seconds (the admin API's range), got {value} (see --help)"
        )

    def test_barrier_timeout_at_the_bound_is_sent(self, switchboard_bin: str, nowhere: str) -> None:
        """600 is allowed: the command goes on to the (absent) admin app, exit 3."""
        done = switchboard(switchboard_bin, "continue", "--timeout", "600", nowhere)
        assert done.returncode == 3, done.stderr
        assert "cannot reach the admin app" in done.stderr

    def test_empty_token_never_means_the_environment(
        self, switchboard_bin: str, nowhere: str
    ) -> None:
        """``--token=`` with SWITCHBOARD_ADMIN_TOKEN set is a usage error, not the
        variable's token."""
        env = {**stack_env(Path("/nonexistent-cache")), "SWITCHBOARD_ADMIN_TOKEN": "from-env"}
        line = refusal(switchboard(switchboard_bin, "status", "--token=", nowhere, env=env))
        assert line == (
            "switchboard status: error: argument --token: is empty; give a token, or leave "
            "--token out to use SWITCHBOARD_ADMIN_TOKEN (see --help)"
        )


class TestVersion:
    """``--version`` at the top and under a subcommand."""

    @pytest.mark.parametrize("words", [("--version",), ("workers", "--version")])
    def test_version(self, switchboard_bin: str, words: tuple[str, ...]) -> None:
        """``switchboard <version>`` on stdout, exit 0."""
        done = switchboard(switchboard_bin, *words)
        assert (done.returncode, done.stdout, done.stderr) == (
            0,
            f"switchboard {package_version()}\n",
            "",
        )


class TestHelp:
    """``--help`` shows what operations.md relies on."""

    def test_router_timing_flags(self, switchboard_bin: str) -> None:
        """The router's four timing flags each have a description and a default."""
        done = switchboard(switchboard_bin, "router", "--help")
        assert done.returncode == 0, done.stderr
        text = " ".join(done.stdout.split())
        timing = ("heartbeat-interval", "heartbeat-timeout", "barrier-timeout", "engine-timeout")
        for flag in timing:
            found = re.search(rf"--{flag}-s S, --{flag} S (.+?) \(default ([0-9.]+)\)", text)
            assert found and len(found.group(1)) > 10, f"--{flag}: {text}"

    def test_up_host_says_who_listens(self, switchboard_bin: str) -> None:
        """``up --help`` says the host covers the workers and the admin app."""
        done = switchboard(switchboard_bin, "up", "--help")
        assert "address the workers and the admin app listen on" in " ".join(done.stdout.split())


class TestConfigRefusals:
    """``switchboard up --config`` naming the file, the key and what is expected."""

    def test_operating_md_example_without_the_model(
        self, switchboard_bin: str, cache_dir: Path, tmp_path: Path
    ) -> None:
        """docs/operating.md's stack.toml, run where /models/my-model does not exist."""
        assert not Path("/models/my-model").exists()
        config = tmp_path / "stack.toml"
        config.write_text(
            f"port = {free_port()}\nadmin_port = {free_port()}\n"
            'tokenizer = "/models/my-model"      # a model directory holding tokenizer.json\n',
            encoding="utf-8",
        )
        done = switchboard(
            switchboard_bin, "up", "--config", "stack.toml", cwd=tmp_path, env=stack_env(cache_dir)
        )
        assert refusal(done) == (
            'switchboard up: stack.toml: tokenizer = "/models/my-model": not found '
            "(expected a tokenizer.json file, or a model directory holding one)"
        )

    @pytest.mark.parametrize("command", ["worker", "engine", "detokenizer"])
    def test_children_name_the_tokenizer_flag(
        self, switchboard_bin: str, command: str, tmp_path: Path
    ) -> None:
        """A process started with a missing --tokenizer names the flag and what a
        tokenizer path may be, as switchboard up does for its setting."""
        run = tmp_path / "run"
        run.mkdir(mode=0o700)
        words = ["--run-dir", str(run), "--tokenizer", "/models/absent"]
        if command == "worker":
            words += ["--worker-id", "w0", "--port", str(free_port())]
        line = refusal(switchboard(switchboard_bin, command, *words))
        assert line == (
            f"switchboard {command}: --tokenizer /models/absent: not found "
            "(expected a tokenizer.json file, or a model directory holding one)"
        )
