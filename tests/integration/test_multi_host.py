"""A stack on two hosts: network namespaces joined by a veth pair, link-local addresses.

The control host (``switchboard up --role control`` in one namespace) runs the router,
the worker gateway, the engine, the detokenizers and the admin app; the worker host
(``switchboard up --role workers`` in the other) runs two HTTP workers that reach the
control host only through the gateway, over tcp with CURVE. The test reaches both over
veth pairs of its own, so it still sees each host while the link between them is down.

Streams through the worker host read exactly the engine's text; a worker with an unlisted
key is refused and counted; a pause spans both hosts; taking the link down ends the
remote workers' in-flight requests with a clear error and marks them dead within the
heartbeat timeout, and bringing it up brings them back, serving exactly again.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.curve_keys import GatewayKeys, assert_intruder_refused, gateway_keys
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.netns import TwoHosts, two_hosts
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.scrape import sample_sum, scrape
from tests.integration.harness.sse import stream_outcomes
from tests.integration.harness.worker_host import WorkerHost, worker_host

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

REPO = Path(__file__).resolve().parents[2]
#: The router's heartbeat timeout (5 s) and the margin of one heartbeat and a poll.
DEAD_WITHIN_S = 5.0 + 2.5
#: The ZMTP heartbeat timeout (3 s) after which a worker sees its connection lost, and a margin.
ENDED_WITHIN_S = 3.0 + 3.0
DEADLINE_S = 30.0
WORKER_IDS = ("hosta-w0", "hosta-w1")


@dataclass
class Stack:
    """Both hosts of the stack, and what they were made with."""

    hosts: TwoHosts
    keys: GatewayKeys
    stack_key: Path
    gateway: str
    control: AdminStack
    workers: WorkerHost

    def listed(self) -> dict[str, dict[str, Any]]:
        with self.control.client(timeout=5.0) as client:
            answer = client.get("/api/workers")
        assert answer.status_code == 200, answer.text
        return {view["id"]: view for view in answer.json()["workers"]}

    def logs(self) -> str:
        """Both hosts' log lines, without the HTTP access lines, for a failure message."""
        lines = [*self.control.stderr().splitlines(), *self.workers.text().splitlines()]
        kept = [line for line in lines if '"GET /' not in line and '"POST /' not in line]
        return "\n".join(sorted(kept)[-60:])

    def states(self) -> dict[str, str]:
        listed = self.listed()
        return {worker: str(listed.get(worker, {}).get("state")) for worker in WORKER_IDS}


def keys_stack(directory: Path) -> Path:
    path = directory / "stack.key"
    subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "keys", "stack", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The control host and a two-worker worker host, each in its own namespace."""
    with two_hosts() as hosts:
        keys = gateway_keys(tmp_path_factory.mktemp("keys"))
        stack_key = keys_stack(keys.directory)
        gateway = f"tcp://{hosts.control_link}:{free_port()}"
        control_args = (
            *("--role", "control", "--host", hosts.control_addr, "--allow-remote"),
            *keys.stack_args(gateway),
            *("--stack-key-file", str(stack_key)),
        )
        with admin_stack(
            tmp_path_factory,
            workers=1,
            extra_args=control_args,
            launcher=hosts.launcher(hosts.control_ns),
            host=hosts.control_addr,
            serving=0,
        ) as control:
            workers_args = (
                *("--workers", "2", "--worker-id-prefix", "hosta-w"),
                *("--host", hosts.workers_addr, "--port", str(free_port()), "--allow-remote"),
                *("--control", gateway.removeprefix("tcp://")),
                *("--curve-key-pair", str(keys.secret("host-a"))),
                *("--gateway-public-key", str(keys.public("control"))),
                *("--stack-key-file", str(stack_key)),
                *("--step-time-s", "0.005"),
            )
            log = tmp_path_factory.mktemp("worker-host") / "up.log"
            with worker_host(
                log, workers_args, launcher=hosts.launcher(hosts.workers_ns)
            ) as workers:
                built = Stack(hosts, keys, stack_key, gateway, control, workers)
                wait_until(
                    lambda: set(built.states().values()) == {"serving"},
                    DEADLINE_S,
                    lambda: f"both remote workers serving: {built.states()}",
                )
                yield built


class TestTwoHosts:
    def test_streams_through_the_worker_host_are_exact(
        self, stack: Stack, predictor: Predictor
    ) -> None:
        """Concurrent streams through the worker host's port all read the engine's text;
        the control host lists both remote workers at their gateway return addresses."""
        outcomes = asyncio.run(
            stream_outcomes(stack.workers.base_url, predictor, 16, 12, "two-hosts")
        )
        assert outcomes == ["exact"] * 16, outcomes
        listed = stack.listed()
        control_metrics = scrape(stack.control)
        for worker in WORKER_IDS:
            assert listed[worker]["endpoint"].endswith(f"/remote-{worker}")
            labels = {"worker": worker, "host": socket.gethostname()}
            assert sample_sum(control_metrics, "switchboard_worker_up", **labels) == 1

        # The worker host's own families are served on its port, for the whole host.
        def generated_tokens() -> float:
            with httpx.Client(trust_env=False, timeout=10.0) as client:
                answer = client.get(f"{stack.workers.base_url}/metrics")
            assert answer.status_code == 200
            return sample_sum(answer.text, "switchboard_generation_tokens_total")

        wait_until(lambda: generated_tokens() >= 16 * 12, DEADLINE_S, "the worker host's tokens")

    def test_a_pause_spans_both_hosts(self, stack: Stack) -> None:
        """The engine on the control host and both workers on the worker host acknowledge."""
        with stack.control.client() as client:
            paused = client.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
            assert paused.status_code == 200, paused.text
            try:
                assert set(WORKER_IDS) <= set(paused.json()["acked"]), paused.json()
                assert set(stack.states().values()) == {"paused"}
            finally:
                resumed = client.post("/api/continue", json={"timeout_s": 5})
                assert resumed.status_code == 200, resumed.text

    def test_an_unlisted_key_is_refused_and_counted(self, stack: Stack) -> None:
        """A worker on the worker host with a key the control host does not list exits 2,
        saying so, and the gateway counts the refusal."""

        argv = (
            *stack.hosts.launcher(stack.hosts.workers_ns),
            *(sys.executable, "-m", "switchboard.cli", "worker"),
            *("--worker-id", "intruder0", "--port", str(free_port())),
            *stack.keys.worker_args(stack.gateway, "intruder", stack.stack_key),
        )
        assert_intruder_refused(stack.control, argv, "intruder0", stack.listed)

    def test_link_down_ends_in_flight_clearly_and_up_brings_them_back(
        self, stack: Stack, predictor: Predictor
    ) -> None:
        """Link down mid-stream: every stream ends (exact, or with a clear
        control_unreachable error) within the ZMTP heartbeat timeout, the control host
        marks both remote workers dead within the router's heartbeat timeout, and the
        worker host's /health says 503. Link up: both serve again, exactly."""

        async def across_the_cut() -> tuple[list[Any], float]:
            running = asyncio.create_task(
                stream_outcomes(stack.workers.base_url, predictor, 6, 1000, "cut")
            )
            await asyncio.sleep(1.0)
            stack.hosts.cut()
            cut_at = time.monotonic()
            outcomes = await asyncio.wait_for(running, 30)
            return outcomes, time.monotonic() - cut_at

        try:
            cut_at = time.monotonic()
            outcomes, ended_after = asyncio.run(across_the_cut())
            unclear = [
                outcome
                for outcome in outcomes
                if outcome != "exact" and "control_unreachable" not in str(outcome)
            ]
            assert not unclear, outcomes
            assert "exact" not in outcomes, "1000 tokens at 5 ms should outlast the cut"
            assert ended_after < ENDED_WITHIN_S, f"streams ended {ended_after:.1f} s after"
            wait_until(
                lambda: set(stack.states().values()) <= {"dead", "None"},
                DEAD_WITHIN_S + cut_at - time.monotonic() + 1.0,
                lambda: f"both remote workers dead: {stack.states()}",
            )
            with httpx.Client(trust_env=False, timeout=5.0) as client:
                health = client.get(f"{stack.workers.base_url}/health")
            assert health.status_code == 503, health.text
        finally:
            stack.hosts.mend()
        wait_until(
            lambda: set(stack.states().values()) == {"serving"},
            DEADLINE_S,
            lambda: f"both remote workers serving again: {stack.states()}\n{stack.logs()}",
        )
        wait_until(
            lambda: (
                asyncio.run(stream_outcomes(stack.workers.base_url, predictor, 8, 12, "mended"))
                == ["exact"] * 8
            ),
            DEADLINE_S,
            "exact streams after the link came back",
            interval=0.5,
            retry_on=(httpx.HTTPError,),
        )
