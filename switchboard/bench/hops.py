"""The middle processes a benchmark routes through: the real router and ``zmq.proxy``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec
import zmq

from router_core.control import ControlClient
from router_core.control.commands import STATUS
from router_core.endpoints import RouterEndpoints
from router_core.process import serve_until_signalled
from router_core.tokenizer_router import RouterSettings, TokenizerRouter
from router_core.transport import DEFAULT_HWM
from switchboard.bench.procs import ProcessGroup, Report, wait_for_path

__all__ = [
    "BENCH_HWM",
    "report_router_status",
    "router_losses",
    "serve_proxy",
    "serve_router",
    "wait_router_ready",
]

#: The high-water mark of every benchmark socket: the router's own default, so that all
#: paths queue alike.
BENCH_HWM: Final = DEFAULT_HWM


def serve_router(report: Report, run_dir: str, heartbeat_timeout_s: float) -> None:
    """Run the tokenizer router on ``run_dir``'s default endpoints, as ``switchboard
    router --run-dir`` does, until SIGTERM."""
    settings = RouterSettings(
        endpoints=RouterEndpoints.in_run_dir(run_dir),
        heartbeat_timeout_s=heartbeat_timeout_s,
    )
    serve_until_signalled(TokenizerRouter(settings))


def wait_router_ready(run_dir: Path) -> None:
    """Wait until a router started on ``run_dir`` has bound all of its sockets."""
    control = RouterEndpoints.in_run_dir(run_dir).control
    wait_for_path(control.removeprefix("ipc://"), "router")


def serve_proxy(report: Report, frontend: str, backend: str) -> None:
    """``zmq.proxy`` from a PULL bound on ``frontend`` to a PUSH connected to ``backend``."""
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    push = context.socket(zmq.PUSH)
    try:
        for sock in (pull, push):
            sock.setsockopt(zmq.SNDHWM, BENCH_HWM)
            sock.setsockopt(zmq.RCVHWM, BENCH_HWM)
        pull.bind(frontend)
        push.connect(backend)
        report.send(("ready", None))
        zmq.proxy(pull, push)
    finally:
        pull.close(linger=0)
        push.close(linger=0)
        context.term()


def report_router_status(report: Report, control: str) -> None:
    """Ask the router for ``status`` over its control socket, as ``switchboard ctl`` does."""
    context = zmq.Context()
    try:
        with ControlClient(control, timeout_s=5.0, context=context, actor="bench") as client:
            report.send(("status", msgspec.to_builtins(client.request(STATUS))))
    finally:
        context.term()


def router_losses(group: ProcessGroup, run_dir: Path) -> dict[str, int]:
    """The router's ``dropped`` and ``rejected`` counters, as ``{"dropped:reason": n}``.

    Asked from a child process: the benchmark's parent never holds a ZeroMQ context, so
    that forking it stays safe.
    """
    control = RouterEndpoints.in_run_dir(run_dir).control
    status: dict[str, Any] = group.expect(
        group.start("router-status", report_router_status, control), "status"
    )
    counters: dict[str, dict[str, int]] = status.get("counters", {})
    return {
        f"{name}:{label}": count
        for name in ("dropped", "rejected")
        for label, count in counters.get(name, {}).items()
    }
