"""HTTP workers streaming in a whole stack: ``switchboard router``, ``detok-router``, 2
detokenizers, the built-in engine and 2 workers on one port, driven over real HTTP by
httpx. Every generated text is predicted from the engine's token rule, so each response
is checked exactly.

One stack serves ``TestNativeStreaming`` (module scope, for speed);
``TestOutputsThroughRouter`` owns its own stack and comes first, because two stacks may
not be alive at once. The OpenAI API, bad input, and draining and stopping workers have
modules of their own (``test_http_worker_openai.py``, ``_bad_input``, ``_lifecycle``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.harness import wait_until
from tests.integration.harness.http_stack import HttpStack
from tests.integration.harness.http_worker import (
    ENOUGH_CONNECTIONS,
    FRESH,
    HTTP_TIMEOUT,
    lengths,
    owned_stack,
    predictor,
    stack,
)
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import generate_stream, stream_problems

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]


@pytest.fixture(scope="class")
def router_outputs_stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """A stack whose detokenizers send text through the tokenizer router."""
    log_dir = tmp_path_factory.mktemp("router-outputs-logs")
    yield from owned_stack(request, switchboard_bin, log_dir, outputs_via="router")


async def native_streams(
    stack: HttpStack, predictor: Predictor, count: int, stem: str
) -> list[str]:
    """Run ``count`` concurrent /generate streams with distinct prompts; the problems."""
    sizes = lengths(count)
    prompts = predictor.distinct_prompts(count, sizes, stem)
    rids = [f"{stem}-{i}" for i in range(count)]
    async with httpx.AsyncClient(
        base_url=stack.base_url, timeout=HTTP_TIMEOUT, limits=ENOUGH_CONNECTIONS
    ) as client:
        seen = await asyncio.gather(
            *(
                generate_stream(
                    client,
                    {"text": prompt, "rid": rid, "sampling_params": {"max_new_tokens": size}},
                )
                for prompt, rid, size in zip(prompts, rids, sizes, strict=True)
            )
        )
    problems = []
    for stream, prompt, rid, size in zip(seen, prompts, rids, sizes, strict=True):
        problems += stream_problems(stream, rid, predictor.text(prompt, size), size)
    return problems


def generate_counts(stack: HttpStack) -> dict[str, int]:
    """Generate requests each worker has sent to the router so far."""
    return {
        worker_id: info["worker"]["counters"].get("requests_sent", {}).get("generate", 0)
        for worker_id, info in stack.worker_infos().items()
    }


class TestOutputsThroughRouter:
    def test_streams_read_their_predicted_text(
        self, router_outputs_stack: HttpStack, predictor: Predictor
    ) -> None:
        """With detokenizers sending text through the tokenizer router, 50 concurrent
        streams each read exactly their predicted text, and the router carried it."""
        stack = router_outputs_stack
        problems = asyncio.run(native_streams(stack, predictor, 50, "via-router"))
        assert not problems, "\n".join(problems[:10])
        counters = stack.ctl("status")["counters"]
        assert counters["routed_rows"]["str_batch"] >= 50, counters
        assert "dropped" not in counters and "rejected" not in counters, counters


class TestNativeStreaming:
    def test_200_concurrent_streams_each_read_their_own_text(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """200 concurrent /generate streams with distinct prompts and 8..24 tokens each get
        exactly their predicted text in cumulative events of their own rid, one length
        finish with the right token count, and end with data: [DONE]."""
        problems = asyncio.run(native_streams(stack, predictor, 200, "native"))
        assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:10])
        stack.assert_running()

    def test_connections_spread_over_both_workers(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """200 requests on 200 connections reach both workers (SO_REUSEPORT balancing),
        and every one is counted by exactly one worker."""
        before = generate_counts(stack)
        prompts = [f"spread {i}" for i in range(200)]

        async def send_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(
                base_url=stack.base_url, timeout=HTTP_TIMEOUT, limits=ENOUGH_CONNECTIONS
            ) as client:
                body = {"sampling_params": {"max_new_tokens": 2}}
                return await asyncio.gather(
                    *(
                        client.post("/generate", json={**body, "text": p}, headers=FRESH)
                        for p in prompts
                    )
                )

        responses = asyncio.run(send_all())
        for prompt, response in zip(prompts, responses, strict=True):
            assert response.status_code == 200, response.text
            assert response.json()["text"] == predictor.text(prompt, 2), prompt
        after = generate_counts(stack)
        served = {worker_id: after[worker_id] - before[worker_id] for worker_id in after}
        assert sum(served.values()) == 200, served
        # Each connection lands on w0 or w1 by a hash of its ports: all 200 on one
        # worker has probability 2**-199.
        assert all(count > 0 for count in served.values()), served

    def test_batched_generate_answers_in_prompt_order(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """A batched /generate (texts, then token ids, each with its own sampling params)
        answers one result per prompt in order; streaming, events carry the index."""
        texts = ["batch one", "batch two", "batch three"]
        sizes = [3, 5, 7]
        body = {
            "text": texts,
            "sampling_params": [{"max_new_tokens": size} for size in sizes],
        }
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            results = client.post("/generate", json=body).raise_for_status().json()
            assert [r["text"] for r in results] == [
                predictor.text(t, n) for t, n in zip(texts, sizes, strict=True)
            ]
            assert [r["meta_info"]["completion_tokens"] for r in results] == sizes
            ids = [[5, 6, 7], [100, 200]]
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 4}, "stream": True}
            with client.stream("POST", "/generate", json=body) as response:
                lines = [line for line in response.iter_lines() if line]
        assert lines[-1] == "data: [DONE]"
        final: dict[int, str] = {}
        for line in lines[:-1]:
            payload = json.loads(line.removeprefix("data: "))
            final[payload["index"]] = payload["text"]
        assert final == {0: predictor.text(ids[0], 4), 1: predictor.text(ids[1], 4)}

    def test_zero_new_tokens_answers_at_once_as_sglang_does(self, stack: HttpStack) -> None:
        """max_new_tokens 0 (which SGLang allows): no text, no tokens, finish reason
        length 0 and the prompt's token count, streaming or not, with n samples, and the
        engine never sees the request."""
        before = generate_counts(stack)
        body = {"text": "nothing more", "sampling_params": {"max_new_tokens": 0}}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            answer = client.post("/generate", json=body).raise_for_status().json()
            meta = answer["meta_info"]
            assert answer["text"] == "" and meta["completion_tokens"] == 0
            assert meta["prompt_tokens"] > 0
            assert meta["finish_reason"] == {"type": "length", "length": 0}
            samples = {**body, "sampling_params": {"max_new_tokens": 0, "n": 2}}
            both = client.post("/generate", json=samples).raise_for_status().json()
            assert [r["text"] for r in both] == ["", ""]
            streamed = {**body, "stream": True}
            with client.stream("POST", "/generate", json=streamed) as response:
                lines = [line for line in response.iter_lines() if line]
        assert lines[-1] == "data: [DONE]" and len(lines) == 2, lines
        event = json.loads(lines[0].removeprefix("data: "))
        assert event["text"] == "" and event["meta_info"]["finish_reason"]["length"] == 0
        assert generate_counts(stack) == before, "the engine was asked for nothing"

    def test_leaving_a_stream_early_aborts_it_in_the_engine(self, stack: HttpStack) -> None:
        """A client that closes a long stream after a few events frees the engine: the
        request stops running there instead of generating its 8000 tokens."""
        body = {"text": "walk away", "sampling_params": {"max_new_tokens": 8000}}

        def running(count: int) -> bool:
            return (stack.ctl("load") or {}).get("running") == count

        with (
            httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client,
            client.stream("POST", "/generate", json={**body, "stream": True}) as response,
        ):
            assert response.status_code == 200
            lines = response.iter_lines()  # kept: dropping it would close the stream
            for _ in range(5):
                next(lines)
            wait_until(lambda: running(1), 15.0, "the engine to run the request")
        wait_until(lambda: running(0), 15.0, lambda: f"the engine to drop it: {stack.ctl('load')}")
        aborts = sum(
            info["worker"]["counters"].get("aborts_sent", {}).get("client", 0)
            for info in stack.worker_infos().values()
        )
        assert aborts >= 1
