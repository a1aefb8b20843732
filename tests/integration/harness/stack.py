"""Starting routers and stand-ins in one run directory, and handles to talk to them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from router_core.control import ControlClient, ControlCommand, ControlTimeout
from router_core.control.command_args import NoArgs
from router_core.control.commands import DETOKENIZER_ROUTER_COMMANDS
from router_core.credentials import KEY_FILE, load_or_create
from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints, worker_address
from tests.integration.harness.control import ask
from tests.integration.harness.polling import ipc_path, wait_until
from tests.integration.harness.processes import ManagedProcess, ProcessManager
from tests.integration.harness.reports import ReportCollector

__all__ = [
    "FAST_ROUTER_ARGS",
    "DetokRouterHandle",
    "RouterHandle",
    "Stack",
    "StandInHandle",
    "router_socket_files",
]

#: Router settings that keep the suite fast: liveness in ~1.5 s, barriers in ~1 s.
FAST_ROUTER_ARGS = (
    "--heartbeat-interval-s=0.2",
    "--heartbeat-timeout-s=1.5",
    "--barrier-timeout-s=1.0",
)

#: Either router's ``status``, its reply taken as it comes (their shapes differ).
EITHER_STATUS: ControlCommand[NoArgs, Any] = ControlCommand(
    "status", NoArgs, Any, "either router's status"
)


def router_socket_files(endpoints: RouterEndpoints) -> list[Path]:
    """The socket files a tokenizer router binds (it connects to ``engine``)."""
    bound = [getattr(endpoints, name) for name in endpoints.__struct_fields__ if name != "engine"]
    return [ipc_path(endpoint) for endpoint in bound]


@dataclass
class RouterHandle:
    """A running tokenizer router and a control client for it."""

    process: ManagedProcess
    endpoints: RouterEndpoints
    control: ControlClient

    def ctl(self, command: str, **args: Any) -> Any:
        self.process.assert_running()
        return ask(self.control, command, **args)

    def raw_ctl(self, command: str, **args: Any) -> Any:
        """``command`` with ``args`` as they are, unchecked: for tests of the router's
        own refusals (an unknown command, arguments its struct does not take)."""
        self.process.assert_running()
        return self.control._call(command, **args)


@dataclass
class DetokRouterHandle:
    """A running detokenizer router and a control client for it."""

    process: ManagedProcess
    endpoints: DetokenizerRouterEndpoints
    control: ControlClient

    def ctl(self, command: str, **args: Any) -> Any:
        self.process.assert_running()
        return ask(self.control, command, commands=DETOKENIZER_ROUTER_COMMANDS, **args)


@dataclass
class StandInHandle:
    """A running stand-in and where to read its reports."""

    process: ManagedProcess
    name: str
    reports: ReportCollector
    address: str = ""

    def report(self) -> dict[str, Any]:
        report = self.reports.latest(self.name)
        assert report is not None, f"no report from {self.name} yet"
        return report

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], Any], timeout: float, what: str
    ) -> dict[str, Any]:
        def guarded(report: dict[str, Any]) -> Any:
            self.process.assert_running()
            return predicate(report)

        return self.reports.wait_for(self.name, guarded, timeout, what)


class Stack:
    """Starts routers and stand-ins in one run directory; owned by the ``stack`` fixture."""

    def __init__(
        self,
        run_dir: Path,
        processes: ProcessManager,
        reports: ReportCollector,
        context: zmq.Context[zmq.Socket[bytes]],
        switchboard: str,
    ) -> None:
        self.run_dir = run_dir
        self.processes = processes
        self.reports = reports
        self.context = context
        self.switchboard = switchboard
        self.endpoints = RouterEndpoints.in_run_dir(run_dir)
        self._clients: list[ControlClient] = []

    @property
    def key(self) -> str:
        """The stack key in the run directory (made by whoever needs it first), for
        messages a test builds by hand."""
        return load_or_create(self.run_dir / KEY_FILE)

    def _control(self, endpoint: str) -> ControlClient:
        client = ControlClient(
            endpoint, timeout_s=5.0, context=self.context, key=self.key, actor="test"
        )
        self._clients.append(client)
        return client

    def _wait_ready(self, proc: ManagedProcess, client: ControlClient, timeout: float) -> None:
        def answers() -> bool:
            proc.assert_running()
            try:
                client.request(EITHER_STATUS, reply_timeout_s=0.25)
            except ControlTimeout:
                return False
            return True

        wait_until(answers, timeout, f"{proc.name} to answer status")

    def start_router(self, *extra: str, name: str = "router", ready: bool = True) -> RouterHandle:
        """Start ``switchboard router`` with fast timeouts; wait until it answers status."""
        argv = [
            self.switchboard,
            "router",
            "--run-dir",
            str(self.run_dir),
            "--parent-pid",
            str(os.getpid()),
            *FAST_ROUTER_ARGS,
            *extra,
        ]
        ep = self.endpoints
        binds = router_socket_files(ep)
        proc = self.processes.spawn(name, argv, binds)
        handle = RouterHandle(proc, ep, self._control(ep.control))
        if ready:
            self._wait_ready(proc, handle.control, 15.0)
        return handle

    def start_detok_router(
        self, count: int, *extra: str, name: str = "detok-router"
    ) -> DetokRouterHandle:
        """Start ``switchboard detok-router`` for ``count`` detokenizers in the run dir."""
        endpoints = DetokenizerRouterEndpoints.in_run_dir(self.run_dir, count)
        argv = [
            self.switchboard,
            "detok-router",
            "--run-dir",
            str(self.run_dir),
            "--detokenizers",
            str(count),
            "--parent-pid",
            str(os.getpid()),
            *extra,
        ]
        binds = [ipc_path(endpoints.inbound), ipc_path(endpoints.control)]
        proc = self.processes.spawn(name, argv, binds)
        handle = DetokRouterHandle(proc, endpoints, self._control(endpoints.control))
        self._wait_ready(proc, handle.control, 15.0)
        return handle

    def start_detokenizer(self, index: int, count: int, *extra: str) -> ManagedProcess:
        """Start ``switchboard detokenizer`` ``index`` of ``count`` in the run dir."""
        endpoint = DetokenizerRouterEndpoints.in_run_dir(self.run_dir, count).detokenizers[index]
        argv = [
            self.switchboard,
            "detokenizer",
            "--run-dir",
            str(self.run_dir),
            "--index",
            str(index),
            "--count",
            str(count),
            "--parent-pid",
            str(os.getpid()),
            *extra,
        ]
        proc = self.processes.spawn(f"detokenizer-{index}", argv, [ipc_path(endpoint)])

        def bound() -> bool:
            proc.assert_running()
            return ipc_path(endpoint).exists()

        wait_until(bound, 15.0, f"detokenizer-{index} to bind")
        return proc

    def start_worker(
        self, worker_id: str, *extra: str, wait_registered: bool = True
    ) -> StandInHandle:
        """Start a stand-in worker; by default wait until the router accepted it."""
        address = worker_address(self.run_dir, worker_id)
        argv = [
            sys.executable,
            "-m",
            "tests.standins.worker",
            "--run-dir",
            str(self.run_dir),
            "--worker-id",
            worker_id,
            "--report-endpoint",
            self.reports.endpoint,
            "--parent-pid",
            str(os.getpid()),
            *extra,
        ]
        proc = self.processes.spawn(f"worker-{worker_id}", argv, [ipc_path(address)])
        handle = StandInHandle(proc, worker_id, self.reports, address)
        if wait_registered:
            handle.wait_for(lambda r: r["registered"], 15.0, "registered")
        return handle

    def start_engine(self, *extra: str, wait_live: RouterHandle | None = None) -> StandInHandle:
        """Start a stand-in engine; optionally wait until ``wait_live`` sees it live."""
        argv = [
            sys.executable,
            "-m",
            "tests.standins.engine",
            "--run-dir",
            str(self.run_dir),
            "--report-endpoint",
            self.reports.endpoint,
            "--parent-pid",
            str(os.getpid()),
            *extra,
        ]
        proc = self.processes.spawn("engine", argv, [ipc_path(self.endpoints.engine)])
        handle = StandInHandle(proc, "engine", self.reports)
        handle.wait_for(lambda r: True, 15.0, "a first report")
        if wait_live is not None:
            router = wait_live
            wait_until(
                lambda: router.ctl("status")["engine_live"], 10.0, "the router to see the engine"
            )
        return handle

    def start_example_engine(
        self, script: Path, *extra: str, wait_live: RouterHandle | None = None
    ) -> ManagedProcess:
        """Start an example engine script (``examples/``) with ``--run-dir``; optionally
        wait until ``wait_live`` sees it live (it published load)."""
        argv = [
            sys.executable,
            "-m",
            "tests.standins.example",
            str(os.getpid()),
            str(script),
            "--run-dir",
            str(self.run_dir),
            *extra,
        ]
        proc = self.processes.spawn(script.stem, argv, [ipc_path(self.endpoints.engine)])
        if wait_live is not None:
            router = wait_live

            def live() -> bool:
                proc.assert_running()
                return bool(router.ctl("status")["engine_live"])

            wait_until(live, 15.0, f"the router to see {script.stem} live")
        return proc

    def start_builtin_engine(
        self, *extra: str, wait_live: RouterHandle | None = None
    ) -> ManagedProcess:
        """Start ``switchboard engine`` (the built-in engine) in the run dir; optionally
        wait until ``wait_live`` sees it live (it published load)."""
        argv = [
            self.switchboard,
            "engine",
            "--run-dir",
            str(self.run_dir),
            "--parent-pid",
            str(os.getpid()),
            *extra,
        ]
        proc = self.processes.spawn("builtin-engine", argv, [ipc_path(self.endpoints.engine)])
        if wait_live is not None:
            router = wait_live

            def live() -> bool:
                proc.assert_running()
                return bool(router.ctl("status")["engine_live"])

            wait_until(live, 15.0, "the router to see the built-in engine live")
        return proc

    def close(self) -> None:
        for client in self._clients:
            client.close()
