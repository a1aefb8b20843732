"""``switchboard up`` keeps its run dir to its user: started under umask 000 in a given
run dir, the dir is 0700 and nothing in it (socket files, the stack key, state and
metrics files) is open to group or others; both routers' control sockets run nothing
without the stack key, ``switchboard ctl --run-dir`` works, and the key is gone after
the stop. A given run dir that others could reach, or that is another user's, is refused
before anything starts."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from router_core.control import ControlClient, ControlError, ErrorCode
from router_core.control.commands import DETOKENIZER_ROUTER_COMMANDS, TOKENIZER_ROUTER_COMMANDS
from router_core.credentials import KEY_FILE, read_key
from router_core.endpoints import ROUTER_STATE_FILE, DetokenizerRouterEndpoints, RouterEndpoints
from tests.integration.harness.control import ask
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT
from tests.integration.harness.supervisor import Stacks, refuse
from tests.support.private_dirs import foreign_directory, umask
from tests.support.zmq_context import bounded_context

pytestmark = pytest.mark.integration


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _everything_in(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*"))


def _ctl(run_dir: Path, *words: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "switchboard.cli", "ctl", "--run-dir", str(run_dir), *words]
    return subprocess.run(
        argv, check=False, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT
    )


class TestStackUnderUmask000:
    """A real stack started with umask 000 in a run dir it creates."""

    def test_run_dir_is_private_and_control_needs_the_key(self, stacks: Stacks) -> None:
        """The run dir is 0700 and every file in it private; keyless control requests
        are refused on both routers, keyed ones and ctl --run-dir served; the stop
        removes the key and the state files."""
        run_dir = stacks.run_dir / "run"  # created by switchboard up
        with umask(0o000):
            supervisor = stacks.start("--run-dir", str(run_dir), "--workers", "1")
        assert supervisor.run_dir == run_dir
        assert _mode(run_dir) == 0o700
        everything = _everything_in(run_dir)
        names = {path.name for path in everything}
        # (The detokenizer router writes its state file at its first assignment.)
        expected = {KEY_FILE, ROUTER_STATE_FILE, "metrics"}
        expected |= {"router-control", "detok-router-control", "router-requests"}
        assert expected <= names, sorted(names)
        assert any(stat.S_ISSOCK(path.lstat().st_mode) for path in everything)
        open_to_others = {str(path): oct(_mode(path)) for path in everything if _mode(path) & 0o077}
        assert open_to_others == {}

        key = read_key(run_dir / KEY_FILE)
        controls = (
            (RouterEndpoints.in_run_dir(run_dir).control, TOKENIZER_ROUTER_COMMANDS),
            (
                DetokenizerRouterEndpoints.in_run_dir(run_dir, 1).control,
                DETOKENIZER_ROUTER_COMMANDS,
            ),
        )
        with bounded_context() as context:
            for endpoint, commands in controls:
                keyless = ControlClient(endpoint, timeout_s=5.0, context=context)
                with keyless, pytest.raises(ControlError) as refused:
                    ask(keyless, "status", commands=commands)
                assert refused.value.code is ErrorCode.UNAUTHORIZED, endpoint
                with ControlClient(endpoint, timeout_s=5.0, context=context, key=key) as keyed:
                    assert ask(keyed, "status", commands=commands)["pid"] > 0
        for words in (("status",), ("--detok-router", "status"), ("list_workers",)):
            done = _ctl(run_dir, *words)
            assert done.returncode == 0, done.stderr
        assert [worker["id"] for worker in json.loads(done.stdout)] == ["w0"]

        assert supervisor.terminate() == 0
        assert not (run_dir / KEY_FILE).exists()
        assert not (run_dir / ROUTER_STATE_FILE).exists()
        assert _mode(run_dir) == 0o700


class TestRunDirRefusals:
    """A given run dir that is not private stops switchboard up before it starts."""

    def test_run_dir_others_can_reach_is_refused(self, cache_dir: Path, tmp_path: Path) -> None:
        """An existing 0777 run dir is refused in one line saying how to fix it, and
        nothing is written into it."""
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        line = refuse(cache_dir, "--run-dir", str(shared), "--port", str(free_port()))
        assert line == (
            f"switchboard up: --run-dir {shared}: mode 0777 lets other users reach the "
            f"stack's sockets and key (chmod 700 {shared}, or use another directory)"
        )
        assert list(shared.iterdir()) == []

    def test_run_dir_of_another_user_is_refused(self, cache_dir: Path, tmp_path: Path) -> None:
        """A run dir owned by another user (here ``nobody``) is refused, even at 0700."""
        theirs = foreign_directory(tmp_path / "theirs")
        line = refuse(cache_dir, "--run-dir", str(theirs), "--port", str(free_port()))
        assert line.startswith(f"switchboard up: --run-dir {theirs}: owned by uid ")
        assert line.endswith("use a directory of your own")
