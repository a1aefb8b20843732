"""A whole HTTP stack in one run directory.

:func:`http_stack` starts ``switchboard router``, ``switchboard detok-router``, M
``switchboard detokenizer`` s, the built-in engine and N HTTP workers
(``python -m switchboard.cli worker``) sharing one free loopback port; it yields an
:class:`HttpStack` once every worker is serving, and on the way out stops everything with
SIGTERM and fails if a process exited badly or left a socket file behind. It is a plain
context manager so that a fixture of any scope can own it.

What its outputs must be: :mod:`tests.integration.harness.predictor` predicts them and
:mod:`tests.integration.harness.sse` reads and checks ``/generate`` streams.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import zmq

from router_core.endpoints import worker_address
from tests.integration.harness.polling import ipc_path, socket_files, wait_until
from tests.integration.harness.processes import ManagedProcess, ProcessManager
from tests.integration.harness.reports import ReportCollector
from tests.integration.harness.stack import DetokRouterHandle, RouterHandle, Stack
from tests.support.zmq_context import ContextLeak, terminate

__all__ = ["MODEL", "HttpStack", "free_port", "http_stack"]

#: The model name workers serve by default.
MODEL = "switchboard-sim"
#: Seven or so Python processes start on a noisy 2-core machine.
STARTUP_S = 60.0
#: Liveness and barriers loose enough that a worker busy with hundreds of streams on a
#: loaded machine is never declared dead; later flags override ``FAST_ROUTER_ARGS``.
ROUTER_ARGS = ("--heartbeat-timeout-s=10", "--barrier-timeout-s=10")
#: In-flight requests get this long after SIGTERM (teardown waits 10 s for a worker).
WORKER_GRACE_S = "5"
#: The stack alive now, if any (see :func:`http_stack`).
_LIVE: list[HttpStack] = []


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class HttpStack:
    """A running stack: its processes, the workers' shared port, and the router's control."""

    run_dir: Path
    port: int
    processes: ProcessManager
    router: RouterHandle
    detok_router: DetokRouterHandle
    detokenizers: list[ManagedProcess]
    engine: ManagedProcess
    workers: dict[str, ManagedProcess] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ctl(self, command: str, **args: Any) -> Any:
        """One control command to the tokenizer router."""
        return self.router.ctl(command, **args)

    def assert_running(self) -> None:
        """Fail, with the dead process's log, if any process of the stack has exited."""
        for proc in self.processes.processes:
            proc.assert_running()

    def worker_views(self) -> dict[str, dict[str, Any]]:
        """The router's registry entries, by worker id."""
        return {view["id"]: view for view in self.ctl("list_workers")}

    def wait_worker_state(self, worker_id: str, state: str, timeout: float = 15.0) -> Any:
        """Wait until the router reports ``worker_id`` in ``state``; return its entry."""

        def reached() -> dict[str, Any] | None:
            self.assert_running()
            view = self.worker_views().get(worker_id)
            return view if view is not None and view["state"] == state else None

        return wait_until(
            reached, timeout, lambda: f"{worker_id} {state}: {self.worker_views().get(worker_id)}"
        )

    def worker_infos(self, timeout: float = 15.0) -> dict[str, dict[str, Any]]:
        """Every live worker's ``/get_server_info``, asked over fresh connections until
        each has answered (the kernel picks the worker of each new connection)."""
        infos: dict[str, dict[str, Any]] = {}
        wanted = {wid for wid, proc in self.workers.items() if proc.alive()}
        headers = {"Connection": "close"}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=10.0) as client:

            def all_answered() -> bool:
                info = client.get("/get_server_info").raise_for_status().json()
                infos[info["worker_id"]] = info
                return wanted <= infos.keys()

            wait_until(all_answered, timeout, lambda: f"{wanted} to answer; got {set(infos)}", 0)
        return infos

    def dump_logs(self) -> str:
        return self.processes.dump_logs()


@contextlib.contextmanager
def http_stack(
    switchboard_bin: str,
    log_dir: Path,
    *,
    workers: int = 2,
    detokenizers: int = 2,
    outputs_via: Literal["workers", "router"] = "workers",
    engine_args: Sequence[str] = (),
    worker_args: Sequence[str] = (),
) -> Iterator[HttpStack]:
    """Start a whole stack (see the module docstring); stop and check it on exit.

    Teardown fails if a process ignored SIGTERM, exited non-zero or by itself, left a
    child running, or left a socket file in the run directory. Logs stay in ``log_dir``.
    """
    if _LIVE:
        # The first stack's teardown would take the second's processes for leftovers.
        raise RuntimeError("one HttpStack at a time: end the other one's scope first")
    run_dir = Path(tempfile.mkdtemp(prefix="sb-http-", dir="/tmp"))
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    context.setsockopt(zmq.LINGER, 0)
    processes = ProcessManager(log_dir)
    # Stack wants a report collector; this stack starts no stand-ins that would use it.
    reports = ReportCollector(context, f"ipc://{run_dir}/reports")
    base = Stack(run_dir, processes, reports, context, switchboard_bin)
    try:
        stack = _start(
            base,
            workers=workers,
            detokenizers=detokenizers,
            outputs_via=outputs_via,
            engine_args=engine_args,
            worker_args=worker_args,
        )
        _LIVE.append(stack)
        yield stack
    except BaseException:
        print(processes.dump_logs())
        raise
    finally:
        _LIVE.clear()
        base.close()
        problems = _stop_workers(processes)
        problems += processes.shutdown()
        reports.close()
        try:
            terminate(context)
        except ContextLeak as leak:
            problems.append(str(leak))
        leftover = socket_files(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
    if leftover:
        problems.append(f"socket files left in the run dir: {leftover}")
    assert not problems, "\n".join(problems) + f"\nlogs in {log_dir}"


def _stop_workers(processes: ProcessManager) -> list[str]:
    """SIGTERM every worker at once and check each: exited 0 in time, socket file removed."""
    workers = [p for p in processes.processes if p.name.startswith("worker-") and p.alive()]
    for proc in workers:
        proc.stopped_by_sigterm = True
        proc.send_signal(signal.SIGTERM)
    problems = []
    for proc in workers:
        try:
            code = proc.popen.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            problems.append(f"{proc.name} ignored SIGTERM for 10 s and was killed")
            continue
        if code != 0:
            problems.append(f"{proc.name} exited {code} on SIGTERM:\n{proc.log_tail()}")
            continue
        leftover = [str(path) for path in proc.binds if path.exists()]
        if leftover:
            problems.append(f"{proc.name} left socket files after SIGTERM: {leftover}")
        # Checked here; the process manager then neither re-checks nor judges the status.
        proc.expect_clean_exit = False
    return problems


def _start(
    base: Stack,
    *,
    workers: int,
    detokenizers: int,
    outputs_via: str,
    engine_args: Sequence[str],
    worker_args: Sequence[str],
) -> HttpStack:
    router = base.start_router(*ROUTER_ARGS)
    detok_router = base.start_detok_router(detokenizers)
    detok_procs = [
        base.start_detokenizer(index, detokenizers, "--outputs-via", outputs_via)
        for index in range(detokenizers)
    ]
    engine = base.start_builtin_engine(*engine_args, wait_live=router)
    stack = HttpStack(
        run_dir=base.run_dir,
        port=free_port(),
        processes=base.processes,
        router=router,
        detok_router=detok_router,
        detokenizers=detok_procs,
        engine=engine,
    )
    for index in range(workers):
        worker_id = f"w{index}"
        argv = [
            sys.executable,
            "-m",
            "switchboard.cli",
            "worker",
            "--run-dir",
            str(base.run_dir),
            "--worker-id",
            worker_id,
            "--host",
            "127.0.0.1",
            "--port",
            str(stack.port),
            "--parent-pid",
            str(os.getpid()),
            "--graceful-timeout-s",
            WORKER_GRACE_S,
            *worker_args,
        ]
        binds = [ipc_path(worker_address(base.run_dir, worker_id))]
        stack.workers[worker_id] = base.processes.spawn(f"worker-{worker_id}", argv, binds)

    def all_serving() -> bool:
        stack.assert_running()
        views = stack.worker_views()
        return all(views.get(wid, {}).get("state") == "serving" for wid in stack.workers)

    wait_until(all_serving, STARTUP_S, lambda: f"every worker serving: {stack.ctl('list_workers')}")
    return stack
