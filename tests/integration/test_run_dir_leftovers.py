"""What ``kill -9`` of ``switchboard up`` leaves in its temporary run directory, and the
next ``switchboard up`` removing it (``docs/operating.md`` sections 6 and 8).

Both supervisors run with ``TMPDIR`` set to a private directory of the test's, so their
temporary run directories are the only ``switchboard-*`` ones there and no other stack
on the machine is swept or sweeps.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import socket_files, wait_until
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.supervisor import Supervisor, generate, gone, stack_env, up_argv

pytestmark = pytest.mark.integration

#: The children stop on the kernel's SIGTERM (PR_SET_PDEATHSIG); workers drain first.
CHILDREN_GONE_S = 20.0


@pytest.fixture
def base() -> Iterator[Path]:
    """A short private TMPDIR for the supervisors' temporary run directories."""
    path = Path(tempfile.mkdtemp(prefix="sbk-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start(cache_dir: Path, base: Path, log_dir: Path) -> Supervisor:
    """``switchboard up`` with a temporary run directory under ``base``, serving."""
    log_dir.mkdir()
    argv = up_argv("--port", str(free_port()), "--admin-port", str(free_port()), "--workers", "2")
    supervisor = Supervisor(argv, {**stack_env(cache_dir), "TMPDIR": str(base)}, log_dir)
    supervisor.wait_serving()
    return supervisor


def tree(directory: Path) -> list[str]:
    """Every path under ``directory``, relative, pids in file names as ``PID``."""
    names = []
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        stem, _, pid = path.stem.rpartition("_")
        if path.suffix == ".db" and pid.isdigit():
            name = str(path.relative_to(directory).with_name(f"{stem}_PID.db"))
        names.append(name)
    return sorted(set(names))


class TestKilledSupervisorLeftovers:
    def test_leftovers_then_next_up_removes_them(
        self, cache_dir: Path, base: Path, tmp_path: Path
    ) -> None:
        """After kill -9 every child exits and removes its sockets; the key, the owner
        file, both state files and metrics/ with the workers' and engine's files stay;
        the next switchboard up removes that directory, says so, and its own clean stop
        leaves TMPDIR empty."""
        first = start(cache_dir, base, tmp_path / "first")
        try:
            for _ in range(3):
                assert generate(first.url, timeout=30).status_code == 200
            children = first.children()
            first.popen.kill()
            first.popen.wait(timeout=10)
            wait_until(
                lambda: all(gone(child) for child in children),
                CHILDREN_GONE_S,
                lambda: f"children still running: {[c for c in children if not gone(c)]}",
            )
        finally:
            problems = first.shutdown()
        assert problems == []
        left = first.run_dir
        assert left.parent == base
        assert socket_files(left) == []
        assert tree(left) == [
            "detok-router-state.json",
            "metrics",
            "metrics/counter_PID.db",
            "metrics/gauge_livesum_PID.db",
            "metrics/histogram_PID.db",
            "router-state.json",
            "stack.key",
            "supervisor.pid",
        ]
        second = start(cache_dir, base, tmp_path / "second")
        try:
            assert not left.exists()
            assert f"removed {left}, left by a supervisor that was killed" in second.stderr()
            assert [path.name for path in base.iterdir()] == [second.run_dir.name]
            assert second.terminate() == 0
        finally:
            problems = second.shutdown()
        assert problems == []
        assert list(base.iterdir()) == []
