"""HTTP workers drained and stopped in a whole stack (see ``test_http_worker.py``): a
drained worker started by hand (a socket of its own in the port's SO_REUSEPORT group)
leaves the group, so its sibling takes every new connection, finishes its streams and
rejoins when undrained; a worker stopped by SIGTERM finishes its streams and
deregisters. ``TestWorkerShutdown`` stops a worker and so comes last.
"""

from __future__ import annotations

import asyncio
import signal

import httpx
import pytest

from tests.integration.harness import wait_until
from tests.integration.harness.http_stack import HttpStack
from tests.integration.harness.http_worker import (
    ENOUGH_CONNECTIONS,
    FRESH,
    HTTP_TIMEOUT,
    predictor,
    stack,
)
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import SseStream, generate_stream, stream_problems

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]


class TestDrain:
    def test_drained_worker_leaves_the_port_and_undrain_brings_it_back(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """Draining w0 lets its in-flight streams finish; meanwhile every new connection
        goes to w1 (40 fresh requests all served exactly, /health answered by w1); undrain
        puts w0 back on the port."""
        long_tokens = 300
        prompts = [f"long stream {i}" for i in range(16)]

        async def scenario() -> tuple[list[SseStream], list[httpx.Response]]:
            async with httpx.AsyncClient(
                base_url=stack.base_url, timeout=HTTP_TIMEOUT, limits=ENOUGH_CONNECTIONS
            ) as client:
                body = {"sampling_params": {"max_new_tokens": long_tokens}}
                streams = [
                    asyncio.create_task(
                        generate_stream(client, {**body, "text": p, "rid": f"drain-{i}"})
                    )
                    for i, p in enumerate(prompts)
                ]
                await asyncio.to_thread(
                    wait_until, all_admitted, 30.0, "every stream in flight, some on w0"
                )
                drained = await asyncio.to_thread(stack.ctl, "drain", worker_id="w0")
                assert drained["state"] == "draining", drained
                await asyncio.to_thread(wait_until, w0_left, 10.0, "w0 off the port")
                short = {"sampling_params": {"max_new_tokens": 4}}
                probes = await asyncio.gather(
                    *(
                        client.post(
                            "/generate", json={**short, "text": f"probe {i}"}, headers=FRESH
                        )
                        for i in range(40)
                    )
                )
                return await asyncio.gather(*streams), probes

        def all_admitted() -> bool:
            views = stack.worker_views()
            inflight = sum(view["inflight"] for view in views.values())
            return views["w0"]["inflight"] > 0 and inflight == len(prompts)

        def w0_left() -> bool:
            return set(health_by_worker(stack, tries=10)) == {"w1"}

        try:
            streams, probes = asyncio.run(scenario())
            problems = []
            for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True)):
                want = predictor.text(prompt, long_tokens)
                problems += stream_problems(seen, f"drain-{i}", want, long_tokens)
            assert not problems, "\n".join(problems[:10])
            for i, probe in enumerate(probes):
                assert probe.status_code == 200, probe.text
                assert probe.json()["text"] == predictor.text(f"probe {i}", 4)
            view = stack.wait_worker_state("w0", "drained")
            assert view["safe_to_delete"] and view["inflight"] == 0
            assert set(health_by_worker(stack)) == {"w1"}
        finally:
            stack.ctl("undrain", worker_id="w0")
        stack.wait_worker_state("w0", "serving")
        wait_until(
            lambda: set(health_by_worker(stack)) == {"w0", "w1"}, 10.0, "w0 back on the port"
        )
        infos = stack.worker_infos()
        assert infos["w0"]["worker"]["state"] == "serving"
        assert "draining" not in infos["w0"]["worker"]["counters"].get("http_rejected", {})


def health_by_worker(stack: HttpStack, tries: int = 40) -> dict[str, int]:
    """GET /health over ``tries`` fresh connections: how many each worker answered (all
    must answer 200)."""
    seen: dict[str, int] = {}
    with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
        for _ in range(tries):
            response = client.get("/health")
            assert response.status_code == 200, response.text
            who = response.headers["X-Switchboard-Worker"]
            seen[who] = seen.get(who, 0) + 1
    return seen


class TestWorkerShutdown:
    def test_sigterm_finishes_inflight_streams_and_deregisters(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """SIGTERM to w1 while it streams: its streams still end with their full text,
        it deregisters and removes its socket file, and w0 keeps serving the port."""
        w1 = stack.workers["w1"]
        tokens = 150
        prompts = [f"shutdown stream {i}" for i in range(12)]

        async def scenario() -> list[SseStream]:
            async with httpx.AsyncClient(
                base_url=stack.base_url, timeout=HTTP_TIMEOUT, limits=ENOUGH_CONNECTIONS
            ) as client:
                body = {"sampling_params": {"max_new_tokens": tokens}}
                streams = [
                    asyncio.create_task(
                        generate_stream(client, {**body, "text": p, "rid": f"term-{i}"})
                    )
                    for i, p in enumerate(prompts)
                ]
                await asyncio.to_thread(wait_until, w1_busy, 30.0, "w1 has streams in flight")
                w1.stopped_by_sigterm = True
                w1.send_signal(signal.SIGTERM)
                return await asyncio.gather(*streams)

        def w1_busy() -> bool:
            return stack.worker_views()["w1"]["inflight"] > 0

        streams = asyncio.run(scenario())
        problems = []
        for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True)):
            problems += stream_problems(seen, f"term-{i}", predictor.text(prompt, tokens), tokens)
        assert not problems, "\n".join(problems[:10])
        w1.popen.wait(timeout=15.0)
        assert w1.popen.returncode in (0, -signal.SIGTERM), w1.log_tail()
        assert not any(path.exists() for path in w1.binds)
        wait_until(lambda: "w1" not in stack.worker_views(), 10.0, "the router to forget w1")
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
            for i in range(10):
                body = {"text": f"after {i}", "sampling_params": {"max_new_tokens": 3}}
                response = client.post("/generate", json=body)
                assert response.status_code == 200, response.text
                assert response.json()["text"] == predictor.text(f"after {i}", 3)

    def test_sigterm_exit_status_is_zero(self, stack: HttpStack) -> None:
        """A worker stopped by SIGTERM exits with status 0, like every other process."""
        w1 = stack.workers["w1"]
        if w1.alive():
            w1.stopped_by_sigterm = True
            w1.send_signal(signal.SIGTERM)
        assert w1.popen.wait(timeout=15.0) == 0
