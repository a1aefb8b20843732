"""``switchboard up`` as the fault suite runs it: one real stack per test, private and checked.

:func:`fault_stack` starts ``python -m switchboard.cli up`` on free loopback ports, with
a private run directory under ``/tmp`` (ipc paths stay short) and one operator token,
waits until it serves (the serving line, the admin app's ``/readyz``, every worker
``serving`` at the router) and yields a :class:`FaultStack`. On the way out it resumes
any process a test stopped, SIGTERMs the supervisor (unless the test killed it) and
fails the test if the supervisor did not exit 0, if any process it ever started is
still running, or if a socket file is left in the run directory. Processes left over
are SIGKILLed by pid.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tests.fault.harness.procfs import alive, children_by_role
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, child_env, socket_files, wait_until
from tests.integration.harness.up_stop import stop_supervisor

__all__ = ["STARTUP_S", "STOP_S", "FaultStack", "StackConfig", "fault_stack"]

SERVING_LINE = re.compile(r"^switchboard: serving (http://\S+) .*; run dir (\S+); Ctrl-C to stop$")
#: Eight Python processes start on a noisy 2-core machine.
STARTUP_S = 90.0
#: A drain of idle workers and the ordered stop; SIGKILLs after stop_timeout_s take longer.
STOP_S = 60.0
#: Passed through to the stack; every other ``SWITCHBOARD_*`` of the test run is not.
_KEPT = frozenset({"SWITCHBOARD_NO_FASTPATH", "SWITCHBOARD_CACHE_DIR"})


@dataclass(frozen=True)
class StackConfig:
    """The stack a test wants: how many of each and any further ``switchboard up`` flags.

    ``idle_timeout_s`` is the workers' last-resort bound on a request that gets no output
    (60 s by default): shorter here, so that a request whose output a fault lost ends
    (a 503 naming the cause) well within the suite's own bound on any request
    (``load.REQUEST_BOUND_S``), and the figures show how long it waited.
    """

    workers: int = 2
    detokenizers: int = 2
    step_time_s: float = 0.005
    idle_timeout_s: float = 10.0
    extra_args: tuple[str, ...] = ()
    #: A GGUF file: the stack runs the llama.cpp engine on it instead of the simulation.
    model: Path | None = None

    @property
    def engine(self) -> str:
        """``sim`` or ``llama-cpp``: the figures name it."""
        return "sim" if self.model is None else "llama-cpp"

    def engine_args(self) -> tuple[str, ...]:
        """The engine's ``switchboard up`` flags. The llama.cpp engine gets one thread:
        on two cores its second would spin against the stack's other processes."""
        if self.model is None:
            return ("--step-time-s", repr(self.step_time_s))
        return (
            *("--engine", "llama-cpp", "--model", str(self.model)),
            *("--threads", "1", "--sequences", "32", "--context-size", "4096"),
        )


@dataclass
class FaultStack:
    """A running ``switchboard up``, its ports, run directory, token and processes."""

    config: StackConfig
    supervisor: subprocess.Popen[bytes]
    port: int
    admin_port: int
    token: str
    run_dir: Path
    log_dir: Path
    #: Every process the supervisor started so far, by pid (checked at teardown).
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    #: Set by :meth:`kill_supervisor`: teardown then expects no exit status.
    supervisor_killed: bool = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def model(self) -> str:
        """The model name the workers serve (the file's name with the llama.cpp engine)."""
        if self.config.model is not None:
            return self.config.model.name.removesuffix(".gguf")
        return "switchboard-sim"

    def log(self) -> str:
        """Every process's log lines (the supervisor's stderr)."""
        return (self.log_dir / "up.stderr").read_text(errors="replace")

    def log_tail(self, chars: int = 6000) -> str:
        return self.log()[-chars:]

    def assert_running(self) -> None:
        code = self.supervisor.poll()
        if code is not None:
            raise AssertionError(f"switchboard up exited {code}:\n{self.log_tail()}")

    def roles(self) -> dict[str, int]:
        """Role name (``router``, ``worker-w0``, ...) -> pid of every live child."""
        found = children_by_role(self.supervisor.pid)
        for pid in found.values():
            if pid not in self.seen:
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.seen[pid] = psutil.Process(pid)
        return found

    def pid(self, role: str) -> int:
        found = self.roles()
        assert role in found, f"no live {role} among {sorted(found)}"
        return found[role]

    def workers(self) -> dict[str, int]:
        """Worker role name (``worker-w0``) -> pid of every live worker."""
        return {role: pid for role, pid in self.roles().items() if role.startswith("worker-")}

    def stack_pids(self) -> list[int]:
        """The supervisor and every live child."""
        return [self.supervisor.pid, *self.roles().values()]

    def admin(self, timeout: float = 10.0) -> httpx.Client:
        """A client of the admin app with the operator's token."""
        return httpx.Client(
            base_url=self.admin_url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
            trust_env=False,
        )

    def async_admin(self, timeout: float = 10.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.admin_url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
            trust_env=False,
        )

    def kill_supervisor(self) -> None:
        """SIGKILL the supervisor itself (teardown then only checks what it left)."""
        self.roles()
        self.supervisor_killed = True
        self.supervisor.kill()
        self.supervisor.wait(timeout=10)


def _env(token: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in child_env().items()
        if not name.upper().startswith("SWITCHBOARD_") or name.upper() in _KEPT
    }
    env["SWITCHBOARD_ADMIN_OPERATOR_TOKENS"] = f"fault:{token}"
    return env


def _wait_ready(stack: FaultStack) -> None:
    def serving_line() -> re.Match[str] | None:
        stack.assert_running()
        return SERVING_LINE.match((stack.log_dir / "up.stdout").read_text().strip())

    wait_until(serving_line, STARTUP_S, "the serving line")
    with stack.admin(timeout=2.0) as admin:

        def ready() -> bool:
            stack.assert_running()
            try:
                if admin.get("/readyz").status_code != 200:
                    return False
                listed = admin.get("/api/workers").json()["workers"]
            except httpx.HTTPError:
                return False
            serving = [w for w in listed if w["state"] == "serving"]
            return len(serving) == stack.config.workers

        wait_until(ready, STARTUP_S, "readyz and every worker serving", 0.05)
    stack.roles()


def _stop(stack: FaultStack) -> list[str]:
    """Stop the stack if it runs; what went wrong."""
    problems: list[str] = []
    if not stack.supervisor_killed:
        stack.roles()
    running = stack.supervisor.poll() is None
    problems += stop_supervisor(stack.supervisor, stack.seen.values(), STOP_S)
    if not running and not stack.supervisor_killed and stack.supervisor.returncode != 0:
        problems.append(f"switchboard up had exited {stack.supervisor.returncode}")
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not any(alive(pid) for pid in stack.seen), 15.0, "children gone")
    leftover = sorted(pid for pid in stack.seen if alive(pid))
    for pid in leftover:
        with contextlib.suppress(psutil.NoSuchProcess):
            stack.seen[pid].kill()
    if leftover:
        problems.append(f"processes left running (killed now): {leftover}")
    return problems


@contextlib.contextmanager
def fault_stack(log_root: Path, config: StackConfig = StackConfig()) -> Iterator[FaultStack]:
    """Start a stack as ``config`` says, yield it, stop it and check what it left."""
    log_dir = Path(tempfile.mkdtemp(prefix="stack-", dir=log_root))
    run_dir = Path(tempfile.mkdtemp(prefix="sb-fault-", dir="/tmp"))
    port, admin_port = free_port(), free_port()
    while admin_port == port:
        admin_port = free_port()
    token = secrets.token_hex(24)
    argv: Sequence[str] = [
        sys.executable,
        *("-m", "switchboard.cli", "up"),
        *("--workers", str(config.workers), "--detokenizers", str(config.detokenizers)),
        *("--port", str(port), "--admin-port", str(admin_port)),
        *("--run-dir", str(run_dir), *config.engine_args()),
        *("--idle-timeout-s", repr(config.idle_timeout_s)),
        *config.extra_args,
    ]
    with open(log_dir / "up.stdout", "wb") as out, open(log_dir / "up.stderr", "wb") as err:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=REPO_ROOT,
            env=_env(token),
            start_new_session=True,
        )
    stack = FaultStack(config, popen, port, admin_port, token, run_dir, log_dir)
    started = time.monotonic()
    try:
        _wait_ready(stack)
        print(f"stack ready in {time.monotonic() - started:.1f} s: {stack.roles()}")
        yield stack
    except BaseException:
        print(f"switchboard up's log ({log_dir}/up.stderr):\n{stack.log_tail()}")
        raise
    finally:
        problems = _stop(stack)
        leftover = socket_files(run_dir) if run_dir.exists() else []
        if leftover:
            problems.append(f"socket files left in the run dir: {[p.name for p in leftover]}")
        shutil.rmtree(run_dir, ignore_errors=True)
    assert not problems, "\n".join(problems) + f"\nlogs in {log_dir}:\n{stack.log_tail()}"
