"""A request lost to a fault is an error naming its cause, in both faces of the worker.

Real processes (routers, the built-in engine slowed to last a few seconds per request,
two detokenizers, two HTTP workers with a short idle bound). Two faults, each with the
four ways a client asks (SGLang ``/generate`` and OpenAI ``/v1/completions``, whole and
streamed):

* the engine SIGKILLed and started again mid-generation: the workers see its new
  incarnation and end what the old one held, ``cause`` ``engine_restarted``;
* both detokenizers stopped (SIGSTOP) so that no output comes at all: the idle bound ends
  every request, ``cause`` ``idle_timeout``, within the bound plus a second or two.

A whole answer is a 503 with ``{"error": {..., "code": 503, "cause": ...}}`` and
``Retry-After``; a stream that had started ends with that error object as an event, then
``[DONE]``, never with a finish reason as if it had succeeded.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.harness import wait_until
from tests.integration.harness.http_stack import HttpStack
from tests.integration.harness.http_worker import owned_stack

pytestmark = pytest.mark.integration

#: Seconds a request may go without output before its worker ends it.
IDLE_TIMEOUT_S = 3.0
#: A step of the engine: 300 tokens last about 6 s, long enough to be cut.
STEP_TIME_S = "0.02"
TOKENS = 300


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    yield from owned_stack(
        request,
        switchboard_bin,
        tmp_path_factory.mktemp("lost-requests-logs"),
        engine_args=("--step-time-s", STEP_TIME_S),
        worker_args=("--idle-timeout-s", str(IDLE_TIMEOUT_S)),
    )


async def ask(client: httpx.AsyncClient, face: str, stream: bool) -> dict[str, Any]:
    """One request; what came back: status, headers, and the body or the events."""
    if face == "generate":
        path = "/generate"
        body: dict[str, Any] = {
            "text": f"lost {face}",
            "sampling_params": {"max_new_tokens": TOKENS},
        }
    else:
        path = "/v1/completions"
        body = {"model": "switchboard-sim", "prompt": f"lost {face}", "max_tokens": TOKENS}
    body["stream"] = stream
    async with client.stream("POST", path, json=body) as response:
        seen: dict[str, Any] = {"status": response.status_code, "headers": response.headers}
        if not stream or response.status_code != 200:
            seen["body"] = json.loads(await response.aread())
            return seen
        seen["events"] = [
            line.removeprefix("data: ")
            async for line in response.aiter_lines()
            if line.startswith("data: ")
        ]
        return seen


def assert_lost(seen: dict[str, Any], stream: bool, cause: str) -> None:
    """A 503 naming ``cause``, or a stream ending with that error and ``[DONE]``."""
    if not stream:
        assert seen["status"] == 503, seen
        error = seen["body"]["error"]
        assert seen["headers"].get("retry-after") == "1"
    else:
        assert seen["status"] == 200, seen
        events = seen["events"]
        assert events[-1] == "[DONE]", events[-3:]
        error = json.loads(events[-2])["error"]
        for event in events[:-2]:  # nothing before the error claims to have finished
            choices = json.loads(event).get("choices") or [{}]
            meta = json.loads(event).get("meta_info") or {}
            assert choices[0].get("finish_reason") is None and meta.get("finish_reason") is None
    assert (error["code"], error["type"], error["cause"]) == (503, "service_unavailable", cause)
    assert error["message"]


FACES = [("generate", False), ("generate", True), ("completions", False), ("completions", True)]


async def run_all(stack: HttpStack, during: Any) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=60.0, trust_env=False) as c:
        tasks = [asyncio.create_task(ask(c, face, stream)) for face, stream in FACES]
        await asyncio.sleep(1.0)  # every request is generating
        await during()
        return await asyncio.gather(*tasks)


def test_an_engine_restart_ends_what_it_held_with_engine_restarted(stack: HttpStack) -> None:
    async def restart_engine() -> None:
        engine = stack.engine
        engine.kill()
        for path in engine.binds:
            path.unlink(missing_ok=True)
        argv = [str(arg) for arg in engine.popen.args]  # type: ignore[union-attr]
        stack.engine = stack.processes.spawn("engine-restarted", argv, engine.binds)

    results = asyncio.run(run_all(stack, restart_engine))
    for (_, stream), seen in zip(FACES, results, strict=True):
        assert_lost(seen, stream, "engine_restarted")


def test_no_output_at_all_ends_every_request_at_the_idle_bound(stack: HttpStack) -> None:
    wait_until(lambda: (stack.ctl("load") or {}).get("engine_started_ns"), 30.0, "engine up")
    stopped_at: list[float] = []

    async def stop_detokenizers() -> None:
        for detokenizer in stack.detokenizers:
            detokenizer.popen.send_signal(signal.SIGSTOP)
        stopped_at.append(time.monotonic())

    try:
        results = asyncio.run(run_all(stack, stop_detokenizers))
        took = time.monotonic() - stopped_at[0]
    finally:
        for detokenizer in stack.detokenizers:
            detokenizer.popen.send_signal(signal.SIGCONT)
    for (_, stream), seen in zip(FACES, results, strict=True):
        assert_lost(seen, stream, "idle_timeout")
    # The bound, one sweep (a quarter of it) and the time the last rows took to drain.
    assert took < IDLE_TIMEOUT_S + IDLE_TIMEOUT_S / 4 + 3.0, took
    print(f"idle bound {IDLE_TIMEOUT_S} s: every request ended {took:.2f} s after the stop")
