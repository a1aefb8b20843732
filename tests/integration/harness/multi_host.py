"""A stack on two hosts, for the multi-host test modules: :func:`multi_host_stack`.

The control host (``switchboard up --role control`` in one network namespace of
:func:`~tests.integration.harness.netns.two_hosts`) and a worker host (``switchboard up
--role workers``, workers ``hosta-w0`` and ``hosta-w1``, in the other) joined over tcp
with CURVE; it yields a :class:`Stack` once the control host lists both remote workers
serving, and stops both hosts (then removes the namespaces) at the end. With
``traced=True`` each host exports its spans over OTLP to a receiver of its own, bound on
this namespace's address of that host's veth pair (link-local: nothing off the pairs
can reach them). :meth:`Stack.worker_host` starts one more worker host beside it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from switchboard.otlp_receiver import OtlpReceiver
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.curve_keys import GatewayKeys, gateway_keys
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.netns import TwoHosts, two_hosts
from tests.integration.harness.polling import wait_until
from tests.integration.harness.worker_host import WorkerHost, worker_host

__all__ = [
    "DEADLINE_S",
    "DEAD_WITHIN_S",
    "WORKER_IDS",
    "ControlHost",
    "Stack",
    "multi_host_stack",
]

#: The router's heartbeat timeout (5 s) and the margin of one heartbeat and a poll.
DEAD_WITHIN_S = 5.0 + 2.5
DEADLINE_S = 30.0
WORKER_IDS = ("hosta-w0", "hosta-w1")


@dataclass
class ControlHost:
    """The control host, what it was made with, and the receivers (when traced)."""

    hosts: TwoHosts
    keys: GatewayKeys
    stack_key: Path
    gateway: str
    control: AdminStack
    #: Where each host's spans arrive (``control``, ``workers``), when traced.
    receivers: dict[str, OtlpReceiver]
    tmp: pytest.TempPathFactory

    def listed(self) -> dict[str, dict[str, Any]]:
        """The control host's ``GET /api/workers``, by worker id (departed ones too)."""
        with self.control.client(timeout=5.0) as client:
            answer = client.get("/api/workers")
        assert answer.status_code == 200, answer.text
        return {view["id"]: view for view in answer.json()["workers"]}

    def states(self, workers: Sequence[str] = WORKER_IDS) -> dict[str, str]:
        """Each of ``workers``' state on the control host (``None``: not listed)."""
        listed = self.listed()
        return {worker: str(listed.get(worker, {}).get("state")) for worker in workers}

    def worker_args(self, prefix: str, count: int, *extra: str) -> tuple[str, ...]:
        """``switchboard up --role workers`` flags for ``count`` workers named ``prefix``N
        on the worker host, on a port of their own, joining this control host."""
        return (
            *("--workers", str(count), "--worker-id-prefix", prefix),
            *("--host", self.hosts.workers_addr, "--port", str(free_port()), "--allow-remote"),
            *("--control", self.gateway.removeprefix("tcp://")),
            *("--curve-key-pair", str(self.keys.secret("host-a"))),
            *("--gateway-public-key", str(self.keys.public("control"))),
            *("--stack-key-file", str(self.stack_key)),
            *("--step-time-s", "0.005"),
            *extra,
        )

    @contextlib.contextmanager
    def worker_host(self, prefix: str, count: int, *extra: str) -> Iterator[WorkerHost]:
        """One more worker host in the worker namespace (see :meth:`worker_args`)."""
        log = self.tmp.mktemp(f"worker-host-{prefix}") / "up.log"
        launcher = self.hosts.launcher(self.hosts.workers_ns)
        with worker_host(log, self.worker_args(prefix, count, *extra), launcher=launcher) as host:
            yield host

    def cli(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """``switchboard ARGUMENTS`` against the control host's admin app, as its operator."""
        command = [sys.executable, "-m", "switchboard.cli", *arguments]
        env = {
            **os.environ,
            "SWITCHBOARD_ADMIN_URL": self.control.admin_url,
            "SWITCHBOARD_ADMIN_TOKEN": self.control.operator_token,
        }
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, (arguments, done.stdout, done.stderr)
        return done


@dataclass
class Stack(ControlHost):
    """The control host and the stack's own worker host."""

    workers: WorkerHost

    def logs(self) -> str:
        """Both hosts' log lines, without the HTTP access lines, for a failure message."""
        lines = [*self.control.stderr().splitlines(), *self.workers.text().splitlines()]
        kept = [line for line in lines if '"GET /' not in line and '"POST /' not in line]
        return "\n".join(sorted(kept)[-60:])

    def process(self, worker_id: str, host: WorkerHost | None = None) -> psutil.Process:
        """The live process of ``worker_id`` on ``host`` (the stack's worker host)."""
        for process in (host or self.workers).descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                line = process.cmdline()
                if worker_id in line and line[line.index(worker_id) - 1] == "--worker-id":
                    return process
        raise AssertionError(f"no process of {worker_id} on the worker host")


def _stack_key(directory: Path) -> Path:
    path = directory / "stack.key"
    subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "keys", "stack", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


@contextlib.contextmanager
def _receivers(hosts: TwoHosts, traced: bool) -> Iterator[dict[str, OtlpReceiver]]:
    if not traced:
        yield {}
        return
    with (
        OtlpReceiver(host=hosts.here_for_control) as control,
        OtlpReceiver(host=hosts.here_for_workers) as workers,
        pytest.MonkeyPatch.context() as patch,
    ):
        # Quick batches, so a test waits for spans tens of milliseconds, not seconds.
        patch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        yield {"control": control, "workers": workers}


@contextlib.contextmanager
def multi_host_stack(
    tmp: pytest.TempPathFactory, *, traced: bool = False, worker_extra: Sequence[str] = ()
) -> Iterator[Stack]:
    """The control host and a two-worker worker host (see the module docstring);
    ``worker_extra`` are more flags for the worker host."""
    with two_hosts() as hosts, _receivers(hosts, traced) as receivers:
        keys = gateway_keys(tmp.mktemp("keys"))
        stack_key = _stack_key(keys.directory)
        gateway = f"tcp://{hosts.control_link}:{free_port()}"
        export = {name: ("--otlp-endpoint", r.endpoint) for name, r in receivers.items()}
        control_args = (
            *("--role", "control", "--host", hosts.control_addr, "--allow-remote"),
            *keys.stack_args(gateway),
            *("--stack-key-file", str(stack_key)),
            *export.get("control", ()),
        )
        with admin_stack(
            tmp,
            workers=1,
            extra_args=control_args,
            launcher=hosts.launcher(hosts.control_ns),
            host=hosts.control_addr,
            serving=0,
        ) as control:
            alone = ControlHost(hosts, keys, stack_key, gateway, control, receivers, tmp)
            with alone.worker_host(
                "hosta-w", 2, *export.get("workers", ()), *worker_extra
            ) as workers:
                built = Stack(hosts, keys, stack_key, gateway, control, receivers, tmp, workers)
                wait_until(
                    lambda: set(built.states().values()) == {"serving"},
                    DEADLINE_S,
                    lambda: f"both remote workers serving: {built.states()}",
                )
                yield built
