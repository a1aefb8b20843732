"""HTTP workers drained and stopped in a whole stack (see ``test_http_worker.py``): a
drained worker finishes its streams and refuses new ones until undrained, and a worker
stopped by SIGTERM finishes its streams and deregisters. ``TestWorkerShutdown`` stops a
worker and so comes last.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

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
    def test_drained_worker_refuses_with_retry_after_and_undrain_restores(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """Draining w0 lets its in-flight streams finish; meanwhile new requests that
        reach w0 get 503 with Retry-After (and /health there is 503) while those on w1
        are served; undrain makes w0 serve again."""
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
            # Every stream must be admitted before the drain: one that reaches w0 after
            # it is rightly refused, which is not what this test checks.
            views = stack.worker_views()
            inflight = sum(view["inflight"] for view in views.values())
            return views["w0"]["inflight"] > 0 and inflight == len(prompts)

        try:
            streams, probes = asyncio.run(scenario())
            problems = []
            for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True)):
                want = predictor.text(prompt, long_tokens)
                problems += stream_problems(seen, f"drain-{i}", want, long_tokens)
            assert not problems, "\n".join(problems[:10])
            statuses = [probe.status_code for probe in probes]
            # 40 fresh connections: none reaching w0 (or w1) has probability 2**-39.
            assert set(statuses) == {200, 503}, statuses
            for i, probe in enumerate(probes):
                if probe.status_code == 503:
                    assert probe.headers["Retry-After"] == "5"
                    assert probe.json()["error"]["type"] == "service_unavailable"
                else:
                    assert probe.json()["text"] == predictor.text(f"probe {i}", 4)
            view = stack.wait_worker_state("w0", "drained")
            assert view["safe_to_delete"] and view["inflight"] == 0
            health = health_by_status(stack, {200, 503})
            assert health[503].headers["Retry-After"] == "5"
            assert health[503].text == "drained"
        finally:
            stack.ctl("undrain", worker_id="w0")
        stack.wait_worker_state("w0", "serving")
        assert set(health_by_status(stack, {200})) == {200}
        infos = stack.worker_infos()
        assert infos["w0"]["worker"]["state"] == "serving"
        assert infos["w0"]["worker"]["counters"]["http_rejected"]["draining"] > 0


def health_by_status(stack: HttpStack, wanted: set[int], tries: int = 40) -> dict[int, Any]:
    """GET /health over ``tries`` fresh connections; one response per status seen,
    checked to be exactly ``wanted``."""
    seen: dict[int, Any] = {}
    with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
        for _ in range(tries):
            response = client.get("/health")
            seen.setdefault(response.status_code, response)
    assert set(seen) == wanted, {status: r.text for status, r in seen.items()}
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
