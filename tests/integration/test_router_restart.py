"""A tokenizer router SIGKILLed and restarted keeps what operators set.

Real everything: ``switchboard up`` with two HTTP workers, the built-in engine, the
detokenizers and the admin app; the supervisor restarts the router it loses. Each test
does several pause/continue operations first, so the restarted router's sequence numbers
would be lower than the workers' last ones if it did not carry its incarnation and
counter over (the bug this guards against: Continue answered 200 and every worker stayed
paused). Texts are checked against the built-in engine's deterministic output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor

pytestmark = pytest.mark.integration

#: Output tokens per request: long enough to be mid-stream when the router dies.
TOKENS = 120
#: How long the restarted stack has to be back (router restart with back-off + reregister).
RECOVERY_S = 30.0


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """A fresh stack per test (each kills its router)."""
    with admin_stack(tmp_path_factory, workers=2, step_time=0.01) as running:
        yield running


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return Predictor(load_tokenizer())


def status(stack: AdminStack) -> dict[str, Any]:
    with stack.client() as client:
        answer = client.get("/api/status")
    answer.raise_for_status()
    return answer.json()  # type: ignore[no-any-return]


def workers(stack: AdminStack) -> dict[str, str]:
    with stack.client() as client:
        answer = client.get("/api/workers")
    answer.raise_for_status()
    return {w["id"]: w["state"] for w in answer.json()["workers"] if w["state"] != "dead"}


def operate(stack: AdminStack, action: str, **body: Any) -> dict[str, Any]:
    with stack.client(timeout=30.0) as client:
        answer = client.post(f"/api/{action}", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def kill_router(stack: AdminStack) -> int:
    """SIGKILL the router; wait for the supervisor's new one and both workers back."""
    (router,) = stack.role_processes("router")
    old = router.pid
    os.kill(old, signal.SIGKILL)

    def restarted() -> bool:
        fresh = [p for p in stack.role_processes("router") if p.pid != old]
        if not fresh:
            return False
        try:
            return len(workers(stack)) == 2 and status(stack)["router"]["pid"] != old
        except (httpx.HTTPError, KeyError):
            return False

    wait_until(restarted, timeout=RECOVERY_S, message="the router back with both workers")
    return old


async def stream_generate(
    stack: AdminStack, prompt: str, tokens: int, progress: list[int]
) -> tuple[int, str, str]:
    """One streaming /generate: (status, final text, last event); progress counts events."""
    body = {"text": prompt, "stream": True, "sampling_params": {"max_new_tokens": tokens}}
    text, last = "", ""
    async with (
        httpx.AsyncClient(base_url=stack.base_url, timeout=120.0, trust_env=False) as client,
        client.stream("POST", "/generate", json=body) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            last = line
            progress.append(1)
            payload = httpx.Response(200, content=line[6:]).json()
            if "text" in payload:
                text = payload["text"]
        return response.status_code, text, last


async def generate(stack: AdminStack, prompt: str, tokens: int) -> tuple[int, str]:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": tokens}}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=120.0, trust_env=False) as c:
        answer = await c.post("/generate", json=body)
    return answer.status_code, answer.json().get("text", answer.text)


def several_operations(stack: AdminStack, count: int = 3) -> None:
    """Pause and continue ``count`` times, so the op counter is well above 1."""
    for _ in range(count):
        assert operate(stack, "pause", mode="in_place")["complete"]
        assert operate(stack, "continue")["complete"]


async def wait_for(progress: list[int], events: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(progress) < events:
        assert time.monotonic() < deadline, f"only {len(progress)} events in {timeout} s"
        await asyncio.sleep(0.02)


def test_router_killed_while_paused_stays_paused_and_continue_resumes_everything(
    stack: AdminStack, predictor: Predictor
) -> None:
    """Paused in place mid-stream, router SIGKILLed: still paused after the restart,
    nothing generates; Continue resumes both workers and the engine, and the held
    stream and a request that waited for admission both end with their exact texts."""

    async def scenario() -> None:
        several_operations(stack)
        held_prompt, waiting_prompt = "the held stream", "the waiting request"
        progress: list[int] = []
        held = asyncio.create_task(stream_generate(stack, held_prompt, TOKENS, progress))
        await wait_for(progress, 5)
        paused = operate(stack, "pause", mode="in_place")
        assert paused["complete"], paused
        waiting = asyncio.create_task(generate(stack, waiting_prompt, 20))
        old_pid = await asyncio.to_thread(kill_router, stack)
        after = await asyncio.to_thread(status, stack)
        assert after["paused"] and after["pause_mode"] == "in_place", after
        assert after["router"]["pid"] != old_pid
        assert set((await asyncio.to_thread(workers, stack)).values()) == {"paused"}
        events = len(progress)
        await asyncio.sleep(1.5)  # nothing may generate while paused
        assert len(progress) == events, "the held stream advanced while paused"
        assert not waiting.done(), "a new request ran while paused"
        resumed = await asyncio.to_thread(operate, stack, "continue")
        assert resumed["complete"] and not resumed["stragglers"], resumed
        assert "engine" in resumed["acked"] and len(resumed["acked"]) == 3, resumed
        code, text, _ = await asyncio.wait_for(held, 60)
        assert (code, text) == (200, predictor.text(held_prompt, TOKENS))
        code, waited = await asyncio.wait_for(waiting, 60)
        assert (code, waited) == (200, predictor.text(waiting_prompt, 20))
        fresh = await generate(stack, "after the restart", 15)
        assert fresh == (200, predictor.text("after the restart", 15))
        assert set((await asyncio.to_thread(workers, stack)).values()) == {"serving"}

    asyncio.run(scenario())


def test_a_drained_worker_stays_drained_across_a_router_restart(
    stack: AdminStack, predictor: Predictor
) -> None:
    """w0 drained, router SIGKILLed: w0 is drained again on re-registration (the restart
    does not put it back in service), w1 serves every request exactly; undrain brings
    w0 back."""
    several_operations(stack, 2)
    with stack.client() as client:
        assert client.post("/api/workers/w0/drain").status_code == 200
    wait_until(lambda: workers(stack).get("w0") == "drained", timeout=15, message="w0 drained")
    kill_router(stack)
    wait_until(lambda: workers(stack).get("w0") == "drained", timeout=15, message="w0 re-drained")
    assert workers(stack)["w1"] == "serving"
    served = 0
    for index in range(12):  # the kernel picks the worker; the drained one answers 503
        prompt = f"drained check {index}"
        code, text = asyncio.run(generate(stack, prompt, 10))
        assert code in (200, 503), (code, text)
        if code == 200:
            assert text == predictor.text(prompt, 10)
            served += 1
    assert served, "w1 served nothing"
    with stack.client() as client:
        assert client.post("/api/workers/w0/undrain").status_code == 200
    wait_until(lambda: workers(stack).get("w0") == "serving", timeout=15, message="w0 serving")


def worker_process(stack: AdminStack, worker_id: str) -> psutil.Process:
    for process in stack.role_processes("worker"):
        argv = process.cmdline()
        if argv[argv.index("--worker-id") + 1] == worker_id:
            return process
    raise AssertionError(f"no process for {worker_id}")


def test_router_killed_in_the_middle_of_a_barrier(stack: AdminStack, predictor: Predictor) -> None:
    """w1 is stopped (SIGSTOP), so a pause waits for it; the router is SIGKILLed while
    it waits. After the restart (w1 resumed) every worker is paused and nothing
    generates; Continue resumes everything with exact text."""
    several_operations(stack, 2)
    w1 = worker_process(stack, "w1")
    w1.send_signal(signal.SIGSTOP)
    outcome: list[int | str] = []

    def pause_that_waits() -> None:
        # Its router is killed about 1 s in, so it can only end in an error, which the
        # admin app gives once the barrier's timeout (and the client's margin) passed:
        # 6 s keeps the barrier open well past the kill without waiting 20.
        try:
            with stack.client(timeout=40.0) as client:
                answer = client.post("/api/pause", json={"mode": "in_place", "timeout_s": 6})
            outcome.append(answer.status_code)
        except httpx.HTTPError as error:
            outcome.append(type(error).__name__)

    async def scenario() -> None:
        waiter = asyncio.create_task(asyncio.to_thread(pause_that_waits))
        await asyncio.sleep(1.0)  # the barrier is open, w0 and the engine acked
        try:
            await asyncio.to_thread(kill_router_only, stack)
        finally:
            w1.send_signal(signal.SIGCONT)
        await asyncio.to_thread(
            wait_until,
            lambda: workers(stack) == {"w0": "paused", "w1": "paused"},
            timeout=RECOVERY_S,
            message="both workers paused under the new router",
        )
        await asyncio.wait_for(waiter, 60)
        # Its router died: the admin app's 503, not ok, and not the 504 of a barrier
        # that timed out (with w1 stopped) before the kill.
        assert outcome == [503], outcome
        assert (await asyncio.to_thread(status, stack))["paused"]
        pending = asyncio.create_task(generate(stack, "after the barrier", 12))
        await asyncio.sleep(1.0)
        assert not pending.done(), "a request ran while paused"
        resumed = await asyncio.to_thread(operate, stack, "continue")
        assert resumed["complete"] and len(resumed["acked"]) == 3, resumed
        assert await asyncio.wait_for(pending, 60) == (
            200,
            predictor.text("after the barrier", 12),
        )

    asyncio.run(scenario())


def kill_router_only(stack: AdminStack) -> None:
    """SIGKILL the router and wait for its replacement to answer (workers may lag)."""
    (router,) = stack.role_processes("router")
    os.kill(router.pid, signal.SIGKILL)

    def replaced() -> bool:
        try:
            return status(stack)["router"]["pid"] != router.pid
        except (httpx.HTTPError, KeyError):
            return False

    wait_until(replaced, timeout=RECOVERY_S, message="a new router answering")
