"""The control side of ``switchboard bench workers``: the processes of ``switchboard up``
without its HTTP workers.

:func:`control_stack` makes a run directory and stack key as ``up`` does
(:class:`~switchboard.supervisor.rundir.RunDirectory`), lays the stack out with ``up``'s
own :func:`~switchboard.supervisor.layout.stack_layout` and starts every child but the
HTTP workers (the router, detokenizer router, detokenizers, built-in engine and admin
app; or, with ``engine=False``, only the router, detokenizer router and admin app) with
``up``'s :class:`~switchboard.supervisor.children.Child`, in ``up``'s start order,
each group once ``up``'s readiness probe says the one before is ready. So the router is
``switchboard router`` exactly as ``up`` runs it, and the admin app in front of it too.
On the way out every child is stopped as ``up`` stops them (SIGTERM in reverse order,
SIGKILL after the stop timeout) and the run directory is removed, failed trial or not.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app.tokens import NamedToken
from router_core.credentials import read_key
from router_core.endpoints import RouterEndpoints
from switchboard.bench.procs import BenchError
from switchboard.supervisor.admin import AdminAccess
from switchboard.supervisor.backoff import RestartBackoff
from switchboard.supervisor.children import Child
from switchboard.supervisor.layout import (
    ROLE_ORDER,
    START_GROUPS,
    admin_url,
    child_environment,
    stack_layout,
)
from switchboard.supervisor.metrics_dir import MetricsDirectory
from switchboard.supervisor.readiness import Probes
from switchboard.supervisor.rundir import RunDirectory
from switchboard.supervisor.settings import StackSettings
from switchboard.supervisor.shutdown import stop_children

__all__ = ["ControlStack", "control_stack"]

#: How long the children of one start group may take to become ready.
READY_TIMEOUT_S: Final = 60.0
#: How long a stopped child may take to exit before it is killed (``up``'s default).
STOP_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class ControlStack:
    """A running control side: where it is, and how to reach it."""

    run_dir: Path
    #: ``http://127.0.0.1:PORT`` of the admin app.
    admin_url: str
    #: An operator token the admin app accepts.
    token: str
    #: The router process's pid (its CPU time and memory are the benchmark's figures).
    router_pid: int
    #: The stack key (the simulated workers read it from the run directory, as workers do).
    key: str


def _free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(group: list[Child], probes: Probes) -> None:
    """Wait until every child of ``group`` passes its readiness probe; BenchError if one
    exits or the group is not ready within :data:`READY_TIMEOUT_S`."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    waiting = list(group)
    while waiting:
        for child in list(waiting):
            code = child.poll()
            if code is not None:
                raise BenchError(f"{child.name} exited while starting (status {code})")
            if probes.ready(child.spec.ready):
                waiting.remove(child)
        if waiting and time.monotonic() > deadline:
            names = ", ".join(child.name for child in waiting)
            raise BenchError(f"not ready within {READY_TIMEOUT_S:.0f} s: {names}")
        if waiting:
            time.sleep(0.05)


@contextmanager
def control_stack(*, engine: bool = True, log_level: str = "warning") -> Iterator[ControlStack]:
    """Start the control side (see the module docstring); yield it; stop it."""
    token = secrets.token_urlsafe(24)
    chosen: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": _free_port(),
        "admin_port": _free_port(),
        "workers": 1,  # laid out, never started: the simulated workers stand in for them
        "log_level": log_level,
    }
    settings = StackSettings(**chosen)  # every other setting as ``up`` would have it
    run_dir = RunDirectory(None)
    path = run_dir.open()
    metrics = MetricsDirectory(path / "metrics")
    children: list[Child] = []
    probes: Probes | None = None
    try:
        metrics.prepare()
        key = read_key(run_dir.key_file)
        access = AdminAccess((NamedToken("bench", token),))
        layout = stack_layout(settings, path, os.getpid(), access.environment(), key=key)
        wanted = {"router", "detok-router", "admin"}
        if engine:
            wanted |= {"detokenizer", "engine"}
        children = [
            Child(spec, RestartBackoff(1.0, 1.0, 1.0)) for spec in layout if spec.role in wanted
        ]
        router_control = RouterEndpoints.in_run_dir(path).control
        probes = Probes(router_control, f"http://127.0.0.1:{settings.port}", key)
        env = child_environment(os.environ, metrics_dir=metrics.path)
        for roles in START_GROUPS:
            group = [child for child in children if child.spec.role in roles]
            for child in group:
                child.start(env)
            _wait_ready(group, probes)
        router = next(child for child in children if child.spec.role == "router")
        assert router.pid is not None
        yield ControlStack(path, admin_url(settings), token, router.pid, key)
    finally:
        try:
            for role in reversed(ROLE_ORDER):
                group = [child for child in children if child.spec.role == role]
                stop_children(group, STOP_TIMEOUT_S, lambda: False)
        finally:
            if probes is not None:
                probes.close()
            metrics.remove()
            run_dir.close(f for child in children for f in child.spec.socket_files)
