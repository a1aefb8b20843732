"""Pause and continue across a whole HTTP stack, seen by HTTP clients mid-stream.

The engine steps every 20 ms, so tokens would flow steadily unless paused; the router's
``pause`` (modes ``in_place``, ``abort``, ``retract``) and ``continue`` are sent through
its control socket while streams are open, and each stream's outcome is predicted from
the engine's token rule. Each test continues the stack before it ends, pass or fail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.http_stack import MODEL, HttpStack, http_stack
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import SseStream, generate_stream, stream_problems
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration

HTTP_TIMEOUT = httpx.Timeout(60.0)
#: How long a paused stack is watched for tokens that should not come. The window is the
#: assertion here: nothing may arrive in it. Short, because the engine would send a step
#: every 20 ms if it were not paused.
PAUSED_WINDOW_S = 0.5
#: Quiet needed before the window starts: rows of the last step before the pause may
#: still be travelling engine -> detokenizer -> worker -> client after the router's ack.
SETTLE_S = 0.5
BARRIER_S = 8.0
#: The prompt of requests sent while paused.
LATE = "sent while paused"


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """Predictions from the default tokenizer, the one every process of the stack loads."""
    return Predictor(load_tokenizer())


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """2 workers and 2 detokenizers over an engine that steps every 20 ms."""
    engine = ("--step-time", "0.02", "--load-interval", "0.05")
    log_dir = tmp_path_factory.mktemp("pause-logs")
    with http_stack(switchboard_bin, log_dir, engine_args=engine) as the_stack:
        failures = request.session.testsfailed
        yield the_stack
        if request.session.testsfailed > failures:
            print(the_stack.dump_logs())


async def ctl(stack: HttpStack, command: str, **args: Any) -> Any:
    return await asyncio.to_thread(stack.ctl, command, **args)


async def settle(streams: list[SseStream], timeout: float = 10.0) -> None:
    """Wait until no stream has received an event for ``SETTLE_S``."""

    def quiet() -> bool:
        last = max((seen.arrivals[-1] for seen in streams if seen.arrivals), default=0.0)
        return time.monotonic() - last >= SETTLE_S

    await eventually(quiet, timeout, "the streams to go quiet after the pause")


async def load_is(stack: HttpStack, running: int, waiting: int) -> None:
    """Wait until the engine's load, as the router has it, shows these queue sizes."""

    async def matches() -> bool:
        load = await ctl(stack, "load") or {}
        return load.get("running") == running and load.get("waiting") == waiting

    await eventually(matches, 10.0, f"the load to show {running=} {waiting=}", interval=0.05)


def start_streams(
    client: httpx.AsyncClient, prompts: list[str], tokens: int, stem: str
) -> tuple[list[SseStream], list[asyncio.Task[SseStream]]]:
    streams = [SseStream() for _ in prompts]
    tasks = [
        asyncio.create_task(
            generate_stream(
                client,
                {
                    "text": prompt,
                    "rid": f"{stem}-{i}",
                    "sampling_params": {"max_new_tokens": tokens},
                },
                into=seen,
            )
        )
        for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True))
    ]
    return streams, tasks


def all_acked(outcome: dict[str, Any]) -> bool:
    return bool(outcome["complete"]) and set(outcome["acked"]) == {"engine", "w0", "w1"}


class TestPauseInPlace:
    def test_streams_freeze_while_paused_and_finish_whole_after_continue(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """Paused in place mid-stream, no stream receives an event while paused and the
        engine keeps every request running; after continue each finishes with exactly
        its predicted full text.

        The pause's ack and the engine's load (all running, none waiting) are the events
        that prove the pause took; the quiet period and the watch after them stay windows
        because silence is the claim: no event marks the last row of the last step
        arriving, nor a token that never comes."""
        tokens, count = 60, 8
        prompts = predictor.distinct_prompts(count, [tokens] * count, "in place")

        async def scenario() -> list[SseStream]:
            async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
                streams, tasks = start_streams(client, prompts, tokens, "in-place")
                await eventually(
                    lambda: all(seen.completion_tokens >= 2 for seen in streams),
                    30.0,
                    "every stream has tokens",
                )
                paused = await ctl(stack, "pause", mode="in_place", timeout_s=BARRIER_S)
                try:
                    assert all_acked(paused), paused
                    await load_is(stack, running=count, waiting=0)
                    await settle(streams)
                    events = [len(seen.events) for seen in streams]
                    await asyncio.sleep(PAUSED_WINDOW_S)  # the observation window
                    assert [len(seen.events) for seen in streams] == events
                    assert all(seen.completion_tokens < tokens for seen in streams)
                    assert not any(task.done() for task in tasks)
                finally:
                    resumed = await ctl(stack, "continue", timeout_s=BARRIER_S)
                assert all_acked(resumed), resumed
                return await asyncio.gather(*tasks)

        streams = asyncio.run(scenario())
        problems = []
        for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True)):
            problems += stream_problems(
                seen, f"in-place-{i}", predictor.text(prompt, tokens), tokens
            )
        assert not problems, "\n".join(problems[:10])


class TestPauseAbort:
    def test_inflight_streams_end_aborted_and_new_requests_wait_for_continue(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """A pause in abort mode ends every in-flight stream with an SGLang abort finish
        (native) or finish_reason "abort" (openai SDK), each having read a prefix of its
        predicted text; requests sent while paused wait, neither answered nor refused,
        and complete with their full predicted text after continue.

        The in-flight streams' endings and the emptied load are awaited as events; the
        watch over the late requests stays a window, since a held request shows nothing
        that could be waited for (being held is the absence of an answer)."""
        tokens = 200
        prompts = predictor.distinct_prompts(6, [tokens] * 6, "abort")
        sdk_prompts = ["sdk abort one", "sdk abort two"]

        async def sdk_stream(client: openai.AsyncOpenAI, prompt: str, into: list[Any]) -> None:
            stream = await client.completions.create(
                model=MODEL, prompt=prompt, max_tokens=tokens, stream=True
            )
            async for chunk in stream:
                into.extend(chunk.choices)

        async def scenario() -> dict[str, Any]:
            sdk = openai.AsyncOpenAI(
                base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0, timeout=60.0
            )
            async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
                try:
                    streams, tasks = start_streams(client, prompts, tokens, "abort")
                    choices: list[list[Any]] = [[] for _ in sdk_prompts]
                    sdk_tasks = [
                        asyncio.create_task(sdk_stream(sdk, prompt, into))
                        for prompt, into in zip(sdk_prompts, choices, strict=True)
                    ]
                    await eventually(
                        lambda: (
                            all(seen.completion_tokens >= 2 for seen in streams)
                            and all(len(into) >= 2 for into in choices)
                        ),
                        30.0,
                        "every stream has tokens",
                    )
                    paused = await ctl(stack, "pause", mode="abort", timeout_s=BARRIER_S)
                    try:
                        assert all_acked(paused), paused
                        ended = await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
                        await asyncio.wait_for(asyncio.gather(*sdk_tasks), 30.0)
                        await load_is(stack, running=0, waiting=0)
                        late = SseStream()
                        late_task = asyncio.create_task(
                            generate_stream(
                                client,
                                {
                                    "text": LATE,
                                    "rid": "late",
                                    "sampling_params": {"max_new_tokens": 9},
                                },
                                into=late,
                            )
                        )
                        late_sdk = asyncio.create_task(
                            sdk.completions.create(model=MODEL, prompt=LATE, max_tokens=9)
                        )
                        await asyncio.sleep(PAUSED_WINDOW_S)  # the observation window
                        assert late.status is None and not late_task.done()
                        assert not late_sdk.done()
                    finally:
                        resumed = await ctl(stack, "continue", timeout_s=BARRIER_S)
                    assert all_acked(resumed), resumed
                    return {
                        "ended": ended,
                        "choices": choices,
                        "late": await late_task,
                        "late_sdk": await late_sdk,
                    }
                finally:
                    await sdk.close()

        outcome = asyncio.run(scenario())
        for i, (prompt, seen) in enumerate(zip(prompts, outcome["ended"], strict=True)):
            reason = seen.events[-1]["meta_info"]["finish_reason"]
            assert reason["type"] == "abort" and reason["message"], reason
            assert seen.done and not seen.malformed, seen
            assert 2 <= seen.completion_tokens < tokens
            ids = predictor.token_ids(prompt, seen.completion_tokens)
            assert seen.text == predictor.tokenizer.decode(ids), f"abort-{i}"
            assert [e["meta_info"]["id"] for e in seen.events] == [f"abort-{i}"] * len(seen.events)
        for prompt, choices in zip(sdk_prompts, outcome["choices"], strict=True):
            assert choices[-1].finish_reason == "abort"
            assert all(choice.finish_reason is None for choice in choices[:-1])
            text = "".join(choice.text for choice in choices)
            assert predictor.text(prompt, tokens).startswith(text)
        late_problems = stream_problems(outcome["late"], "late", predictor.text(LATE, 9), 9)
        assert not late_problems, late_problems
        late_sdk = outcome["late_sdk"]
        assert late_sdk.choices[0].text == predictor.text(LATE, 9)
        assert late_sdk.choices[0].finish_reason == "length"


class TestPauseRetract:
    def test_retracted_requests_finish_with_the_unpaused_text(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """Paused in retract mode mid-stream, the engine moves every running request back
        to its waiting queue; after continue each stream finishes with exactly the text
        and token count it would have had without the pause."""
        tokens, count = 60, 8
        prompts = predictor.distinct_prompts(count, [tokens] * count, "retract")

        async def scenario() -> list[SseStream]:
            async with httpx.AsyncClient(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
                streams, tasks = start_streams(client, prompts, tokens, "retract")
                await eventually(
                    lambda: all(seen.completion_tokens >= 2 for seen in streams),
                    30.0,
                    "every stream has tokens",
                )
                paused = await ctl(stack, "pause", mode="retract", timeout_s=BARRIER_S)
                try:
                    assert all_acked(paused), paused
                    await load_is(stack, running=0, waiting=count)
                    assert not any(task.done() for task in tasks)
                finally:
                    resumed = await ctl(stack, "continue", timeout_s=BARRIER_S)
                assert all_acked(resumed), resumed
                return await asyncio.gather(*tasks)

        streams = asyncio.run(scenario())
        problems = []
        for i, (prompt, seen) in enumerate(zip(prompts, streams, strict=True)):
            problems += stream_problems(
                seen, f"retract-{i}", predictor.text(prompt, tokens), tokens
            )
        assert not problems, "\n".join(problems[:10])
