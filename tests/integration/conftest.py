"""Fixtures owning every process, socket and directory an integration test touches."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import zmq

from tests.integration.harness import (
    ProcessManager,
    ReportCollector,
    SocketFactory,
    Stack,
    missing,
    socket_files,
)
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.console_page import chromium
from tests.integration.harness.supervisor import Stacks
from tests.support.zmq_context import bounded_context

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def switchboard_bin() -> str:
    """The ``switchboard`` console script of the interpreter running the tests."""
    beside = Path(sys.executable).parent / "switchboard"
    found = str(beside) if beside.exists() else shutil.which("switchboard")
    if found is None:
        missing("the switchboard console script (pip install -e .)")
    assert found is not None
    return found


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A short run directory (ipc paths are limited to ~107 bytes); checked for leftovers."""
    path = Path(tempfile.mkdtemp(prefix="sb-", dir="/tmp"))
    yield path
    leftover = socket_files(path)
    shutil.rmtree(path, ignore_errors=True)
    assert not leftover, f"socket files left in the run dir: {leftover}"


@pytest.fixture
def zmq_context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    """This test's own zmq context, its sockets LINGER 0: a socket still open at teardown
    fails the test at once, named, instead of hanging it (``bounded_context``)."""
    with bounded_context() as context:
        yield context


@pytest.fixture
def sockets(run_dir: Path, zmq_context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[SocketFactory]:
    """Test-owned sockets, closed (socket files removed) at teardown."""
    factory = SocketFactory(zmq_context)
    yield factory
    factory.close()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest,
    run_dir: Path,
    zmq_context: zmq.Context[zmq.Socket[bytes]],
    switchboard_bin: str,
    tmp_path: Path,
) -> Iterator[Stack]:
    """Routers and stand-ins in ``run_dir``; all stopped with SIGTERM and checked at teardown.

    Teardown fails the test if a process ignored SIGTERM, exited non-zero, exited on its
    own, left a child running, or left its socket files behind.
    """
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    processes = ProcessManager(log_dir)
    reports = ReportCollector(zmq_context, f"ipc://{run_dir}/reports")
    the_stack = Stack(run_dir, processes, reports, zmq_context, switchboard_bin)
    try:
        yield the_stack
    finally:
        the_stack.close()
        problems = processes.shutdown()
        reports.close()
        call = getattr(request.node, "rep_call", None)
        if problems or (call is not None and call.failed):
            print(processes.dump_logs())
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tokenizer cache for every ``switchboard up`` of the session (trained by the
    first)."""
    return tmp_path_factory.mktemp("switchboard-cache")


@pytest.fixture
def stacks(cache_dir: Path, tmp_path: Path) -> Iterator[Stacks]:
    """This test's supervisors; teardown fails on a leftover process or socket file."""
    owner = Stacks(cache_dir, tmp_path)
    yield owner
    problems = owner.close()
    if problems:
        for supervisor in owner.started:
            print(supervisor.stderr()[-6000:])
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's :func:`audited_stack` writes its admin audit log (it creates it)."""
    return tmp_path_factory.mktemp("audit") / "admin-audit.jsonl"


@pytest.fixture(scope="module")
def audited_workers() -> int:
    """How many workers :func:`audited_stack` runs; a module overrides this fixture to
    change it."""
    return 2


@pytest.fixture(scope="module")
def audited_stack(
    tmp_path_factory: pytest.TempPathFactory, audit_file: Path, audited_workers: int
) -> Iterator[AdminStack]:
    """One ``switchboard up`` per module: the admin app writing :func:`audit_file`, one
    detokenizer, :func:`audited_workers` workers. Tests leave it serving and unpaused."""
    arguments = ("--detokenizers", "1", "--admin-audit-log", str(audit_file))
    with admin_stack(tmp_path_factory, workers=audited_workers, extra_args=arguments) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, one per module; missing chromium or playwright fails
    under CI=true."""
    with chromium() as launched:
        yield launched
