"""A whole stack with its admin app, started by ``switchboard up``, for admin, CLI and UI tests.

:func:`admin_stack` runs ``python -m switchboard.cli up`` on free loopback ports with one
operator token (``ops``) and one viewer token (``viewer``) in the environment, waits for
the serving line and for the admin app to answer ``/readyz``, and yields an
:class:`AdminStack`. On the way out it SIGTERMs the supervisor and fails if it did not
exit 0, left a process running, or left a socket file in the run directory. It is a
plain context manager so a fixture of any scope (one stack per test module) can own it::

    @pytest.fixture(scope="module")
    def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
        with admin_stack(tmp_path_factory) as running:
            yield running
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, child_env, socket_files, wait_until
from tests.integration.harness.up_stop import gone, live_descendants, stop_supervisor

__all__ = ["SERVING_LINE", "AdminStack", "admin_stack"]

#: The supervisor's serving line; group 1 is the workers' URL, group 2 the run dir.
SERVING_LINE = re.compile(
    r"^switchboard: (?:serving (http://\S+)|control host; workers join at \S+) .*; "
    r"run dir (\S+); Ctrl-C to stop$"
)
#: Eight or so Python processes start on a noisy 2-core machine.
STARTUP_S = 90.0
#: Draining idle workers and stopping every child takes a few seconds; SIGKILLs take longer.
STOP_S = 60.0
#: Variables passed through to the stack; any other ``SWITCHBOARD_*`` of the test run is not.
_KEPT = frozenset({"SWITCHBOARD_NO_FASTPATH", "SWITCHBOARD_CACHE_DIR"})


@dataclass
class AdminStack:
    """A running ``switchboard up`` with its admin app, and the tokens it accepts."""

    #: The workers' shared HTTP port, e.g. ``http://127.0.0.1:PORT``.
    base_url: str
    #: The admin app, e.g. ``http://127.0.0.1:ADMINPORT``.
    admin_url: str
    operator_token: str
    viewer_token: str
    run_dir: Path
    supervisor: subprocess.Popen[bytes]
    #: The supervisor's one stdout line.
    serving_line: str
    log_dir: Path
    #: Every descendant of the supervisor seen so far, by pid (checked at teardown).
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / "up.stdout"

    @property
    def stderr_path(self) -> Path:
        """Every process's log lines (the supervisor's and its children's)."""
        return self.log_dir / "up.stderr"

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def headers(self, token: str | None) -> dict[str, str]:
        """``Authorization: Bearer token`` (nothing for ``None``)."""
        return {} if token is None else {"Authorization": f"Bearer {token}"}

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An HTTP client for the admin app sending ``token`` (the operator's by default)."""
        chosen = self.operator_token if token is None else token
        return httpx.Client(
            base_url=self.admin_url, headers=self.headers(chosen), timeout=timeout, trust_env=False
        )

    def async_client(self, token: str | None = None, timeout: float = 30.0) -> httpx.AsyncClient:
        """Like :meth:`client`, for asyncio tests."""
        chosen = self.operator_token if token is None else token
        return httpx.AsyncClient(
            base_url=self.admin_url, headers=self.headers(chosen), timeout=timeout, trust_env=False
        )

    def assert_running(self) -> None:
        """Fail, with the log's tail, if the supervisor has exited."""
        code = self.supervisor.poll()
        if code is not None:
            raise AssertionError(f"switchboard up exited {code}:\n{self.stderr()[-4000:]}")

    def descendants(self) -> list[psutil.Process]:
        """The supervisor's live descendants (remembered, so teardown can check them)."""
        return live_descendants(self.supervisor.pid, self.seen)

    def role_processes(self, role: str) -> list[psutil.Process]:
        """Running children whose command line is ``... switchboard.cli <role> ...``."""
        found = []
        for process in self.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                if process.cmdline()[2:4] == ["switchboard.cli", role]:
                    found.append(process)
        return found


def _stack_env(operator_token: str | None, viewer_token: str | None) -> dict[str, str]:
    env = {
        name: value
        for name, value in child_env().items()
        if not name.upper().startswith("SWITCHBOARD_") or name.upper() in _KEPT
    }
    if operator_token is not None and viewer_token is not None:
        env["SWITCHBOARD_ADMIN_OPERATOR_TOKENS"] = f"ops:{operator_token}"
        env["SWITCHBOARD_ADMIN_VIEWER_TOKENS"] = f"viewer:{viewer_token}"
    return env


def _log_dir(where: pytest.TempPathFactory | Path) -> Path:
    if isinstance(where, Path):
        where.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="admin-stack-", dir=where))
    return where.mktemp("admin-stack")


def _wait_ready(stack: AdminStack, workers: int) -> None:
    """The serving line is out, the admin app answers ``/readyz`` 200, and the router
    has ``workers`` workers serving (the serving line needs only one of the workers that
    share the port to answer; the others may still be registering)."""

    def serving() -> re.Match[str] | None:
        stack.assert_running()
        return SERVING_LINE.match(stack.stdout().strip())

    match = wait_until(serving, STARTUP_S, "the serving line")
    stack.serving_line = match.group(0)
    stack.run_dir = Path(match.group(2))
    if not stack.operator_token:
        generated = re.search(r"#token=([^;\s]+)", stack.serving_line)
        assert generated is not None, f"no generated token in {stack.serving_line!r}"
        stack.operator_token = generated.group(1)
    with httpx.Client(base_url=stack.admin_url, timeout=2.0, trust_env=False) as client:

        def ready() -> bool:
            stack.assert_running()
            try:
                return client.get("/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, STARTUP_S, "the admin app's /readyz", 0.05)
    with stack.client(timeout=2.0) as client:

        def serving_workers() -> list[str]:
            stack.assert_running()
            listed = client.get("/api/workers").json()["workers"]
            return [worker["id"] for worker in listed if worker["state"] == "serving"]

        wait_until(
            lambda: len(serving_workers()) == workers,
            STARTUP_S,
            lambda: f"{workers} workers serving, got {serving_workers()}",
            0.05,
        )
    stack.descendants()


def _stop(stack: AdminStack) -> list[str]:
    """SIGTERM the supervisor; what went wrong (exit status, leftover processes)."""
    problems = []
    stack.descendants()
    exited = stack.supervisor.poll()
    problems += stop_supervisor(stack.supervisor, stack.seen.values(), STOP_S)
    if exited not in (None, 0):
        problems.append(f"switchboard up had exited {exited}")
    leftover = [process for process in stack.seen.values() if not gone(process)]
    for process in leftover:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    if leftover:
        problems.append(f"processes left running: {leftover}")
    return problems


@contextlib.contextmanager
def admin_stack(
    where: pytest.TempPathFactory | Path,
    *,
    workers: int = 2,
    step_time: float | None = 0.005,
    extra_args: Sequence[str] = (),
    configure_tokens: bool = True,
    launcher: Sequence[str] = (),
    host: str = "127.0.0.1",
    serving: int | None = None,
) -> Iterator[AdminStack]:
    """Start ``switchboard up`` with its admin app (see the module docstring).

    ``where`` is a ``tmp_path_factory`` or a directory for the logs (``up.stdout``,
    ``up.stderr``); ``extra_args`` are more ``switchboard up`` flags; ``step_time`` None
    sets none (an engine command takes its own).
    ``configure_tokens=False`` sets no token, so the supervisor generates an operator
    token: ``operator_token`` is then the one in the serving line's console URL and
    ``viewer_token`` is empty.
    """
    log_dir = _log_dir(where)
    run_dir = Path(tempfile.mkdtemp(prefix="sb-adm-", dir="/tmp"))
    port, admin_port = free_port(), free_port()
    while admin_port == port:
        admin_port = free_port()
    operator_token, viewer_token = (
        (secrets.token_hex(24), secrets.token_hex(24)) if configure_tokens else ("", "")
    )
    argv = [
        *launcher,
        sys.executable,
        "-m",
        "switchboard.cli",
        "up",
        *("--workers", str(workers)),
        *("--port", str(port)),
        *("--admin-port", str(admin_port)),
        *("--run-dir", str(run_dir)),
        *(() if step_time is None else ("--step-time-s", repr(step_time))),
        *extra_args,
    ]
    with open(log_dir / "up.stdout", "wb") as out, open(log_dir / "up.stderr", "wb") as err:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=REPO_ROOT,
            env=_stack_env(operator_token or None, viewer_token or None),
            start_new_session=True,
        )
    stack = AdminStack(
        base_url=f"http://{host}:{port}",
        admin_url=f"http://{host}:{admin_port}",
        operator_token=operator_token,
        viewer_token=viewer_token,
        run_dir=run_dir,
        supervisor=popen,
        serving_line="",
        log_dir=log_dir,
    )
    problems: list[str] = []
    try:
        _wait_ready(stack, workers if serving is None else serving)
        yield stack
    except BaseException:
        print(f"switchboard up's log ({stack.stderr_path}):\n{stack.stderr()[-8000:]}")
        raise
    finally:
        problems = _stop(stack)
        leftover = socket_files(run_dir) if run_dir.exists() else []
        if leftover:
            problems.append(f"socket files left in the run dir: {leftover}")
        shutil.rmtree(run_dir, ignore_errors=True)
        if problems:
            print(f"switchboard up's log ({stack.stderr_path}):\n{stack.stderr()[-8000:]}")
    assert not problems, "\n".join(problems) + f"\nlogs in {log_dir}"
