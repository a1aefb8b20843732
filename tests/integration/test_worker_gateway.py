"""Workers on another host, through the worker gateway, over loopback tcp with CURVE.

A real ``switchboard up`` with ``--gateway-listen`` is the control host; real
``switchboard worker --gateway`` processes are the worker host (its own HTTP port, no
run directory, the stack key copied as an operator would). Streams through a remote worker
are exact; a worker host whose key is not authorised is refused at start and counted; a
pause spans local and remote workers; SIGKILL of the gateway loses no later request;
SIGTERM of a remote worker deregisters it. The multi-host version of these, across network
namespaces, is ``test_multi_host.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.curve_keys import (
    GatewayKeys,
    assert_intruder_refused,
    free_gateway_listen,
    gateway_keys,
)
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import generate_stream, stream_outcomes, stream_problems

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 30.0


class ControlHost:
    """The control stack, its gateway's endpoint and the keys."""

    def __init__(self, stack: AdminStack, listen: str, keys: GatewayKeys) -> None:
        self.stack = stack
        self.listen = listen
        self.keys = keys

    def workers(self) -> dict[str, dict[str, Any]]:
        with self.stack.client() as client:
            listed = client.get("/api/workers")
        assert listed.status_code == 200, listed.text
        return {view["id"]: view for view in listed.json()["workers"]}

    def state_of(self, worker_id: str) -> str | None:
        view = self.workers().get(worker_id)
        return None if view is None else str(view["state"])


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlHost]:
    """A one-worker control host with a worker gateway on loopback."""
    keys = gateway_keys(tmp_path_factory.mktemp("keys"))
    listen = free_gateway_listen()
    with admin_stack(tmp_path_factory, workers=1, extra_args=keys.stack_args(listen)) as stack:
        yield ControlHost(stack, listen, keys)


def worker_argv(control: ControlHost, worker_id: str, port: int, host: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "switchboard.cli",
        "worker",
        *("--worker-id", worker_id, "--port", str(port)),
        *control.keys.worker_args(control.listen, host, control.stack.run_dir / "stack.key"),
    ]


@contextlib.contextmanager
def remote_worker(
    control: ControlHost, worker_id: str, log: Path, host: str = "host-a"
) -> Iterator[str]:
    """A worker on "another host" (its own port, no run dir) until SIGTERM; its base URL."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            worker_argv(control, worker_id, port, host),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: control.state_of(worker_id) == "serving" or process.poll() is not None,
            DEADLINE_S,
            f"remote worker {worker_id} serving",
        )
        assert process.poll() is None, log.read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
            raise AssertionError(f"remote worker {worker_id} outlived SIGTERM by 15 s") from None


async def exact_streams(base_url: str, predictor: Predictor, count: int, stem: str) -> list[str]:
    """``count`` concurrent streams through ``base_url``; what was wrong with them."""
    lengths = [8 + index % 5 for index in range(count)]
    prompts = predictor.distinct_prompts(count, lengths, stem)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0, trust_env=False) as client:
        seen = await asyncio.gather(
            *(
                generate_stream(
                    client, {"text": prompt, "sampling_params": {"max_new_tokens": length}}
                )
                for prompt, length in zip(prompts, lengths, strict=True)
            )
        )
    problems: list[str] = []
    for prompt, length, stream in zip(prompts, lengths, seen, strict=True):
        rid = str(stream.events[-1]["meta_info"]["id"]) if stream.events else "?"
        problems += stream_problems(stream, rid, predictor.text(prompt, length), length)
    return problems


class TestRemoteWorker:
    def test_streams_through_a_remote_worker_are_exact(
        self, control: ControlHost, predictor: Predictor, tmp_path: Path
    ) -> None:
        """Concurrent streams through a worker that reaches the control host only through
        the gateway all read exactly the engine's text; it is listed with its address on
        the control host."""
        with remote_worker(control, "r0", tmp_path / "r0.log") as base_url:
            assert asyncio.run(exact_streams(base_url, predictor, 16, "remote")) == []
            view = control.workers()["r0"]
            assert view["endpoint"] == f"ipc://{control.stack.run_dir}/remote-r0"
        wait_until(lambda: control.state_of("r0") != "serving", DEADLINE_S, "r0 gone")

    def test_an_unlisted_key_is_refused_and_counted(
        self, control: ControlHost, tmp_path: Path
    ) -> None:
        """A worker host with a key not in the authorised-keys file exits 2 at start, saying
        so in one line; the refusal is counted in switchboard_refused_connections_total."""

        assert_intruder_refused(
            control.stack,
            worker_argv(control, "intruder0", free_port(), "intruder"),
            "intruder0",
            control.workers,
        )

    def test_a_pause_spans_local_and_remote_workers(
        self, control: ControlHost, tmp_path: Path
    ) -> None:
        """A pause is acknowledged by the remote worker as by the local one."""
        with remote_worker(control, "r1", tmp_path / "r1.log"), control.stack.client() as client:
            paused = client.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
            assert paused.status_code == 200, paused.text
            try:
                acked = paused.json()
                assert {"w0", "r1"} <= set(acked["acked"]), acked
                assert control.state_of("r1") == "paused"
            finally:
                resumed = client.post("/api/continue", json={"timeout_s": 5})
                assert resumed.status_code == 200, resumed.text

    def test_gateway_killed_then_requests_exact_again(
        self, control: ControlHost, predictor: Predictor, tmp_path: Path
    ) -> None:
        """After SIGKILL of the gateway the supervisor restarts it; the remote worker says
        HELLO again and its later streams are exact."""
        with remote_worker(control, "r2", tmp_path / "r2.log") as base_url:
            (gateway,) = control.stack.role_processes("gateway")
            os.kill(gateway.pid, signal.SIGKILL)
            psutil.wait_procs([gateway], timeout=10)

            def exact_again() -> bool:
                return asyncio.run(exact_streams(base_url, predictor, 2, "again")) == []

            wait_until(
                exact_again,
                DEADLINE_S,
                "exact streams after the gateway restarted",
                interval=0.5,
                retry_on=(httpx.HTTPError, KeyError, AssertionError),
            )
            assert asyncio.run(exact_streams(base_url, predictor, 8, "after")) == []

    def test_gateway_killed_mid_stream_ends_each_stream_exactly_or_clearly(
        self, control: ControlHost, predictor: Predictor, tmp_path: Path
    ) -> None:
        """SIGKILL of the gateway while streams run through the remote worker: each stream
        reads its exact text or ends with a clear control_unreachable error, long before
        the idle bound (the worker sees its connection go); later streams are exact."""
        with remote_worker(control, "r3", tmp_path / "r3.log") as base_url:

            async def streams_across_the_kill() -> tuple[list[Any], float]:
                # Six streams of 400 tokens: about 2 s each at 5 ms a step.
                running = asyncio.create_task(stream_outcomes(base_url, predictor, 6, 400, "kill"))
                await asyncio.sleep(0.5)
                (gateway,) = control.stack.role_processes("gateway")
                os.kill(gateway.pid, signal.SIGKILL)
                killed = asyncio.get_running_loop().time()
                outcomes = await asyncio.wait_for(running, 30)
                return outcomes, asyncio.get_running_loop().time() - killed

            outcomes, took = asyncio.run(streams_across_the_kill())
            unclear = [
                outcome
                for outcome in outcomes
                if outcome != "exact" and "control_unreachable" not in str(outcome)
            ]
            assert not unclear, outcomes
            assert took < 5, f"streams took {took:.1f} s to end after the kill"
            wait_until(
                lambda: asyncio.run(exact_streams(base_url, predictor, 2, "back")) == [],
                DEADLINE_S,
                "exact streams after the gateway restarted",
                interval=0.5,
                retry_on=(httpx.HTTPError, KeyError, AssertionError),
            )
