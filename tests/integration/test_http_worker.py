"""HTTP workers in a whole stack: ``switchboard router``, ``detok-router``, 2 detokenizers,
the built-in engine and 2 workers on one port, driven over real HTTP by httpx and the
official ``openai`` SDK. Every generated text and embedding is predicted from the
engine's token and embedding rules, so each response is checked exactly.

One stack serves the module from ``TestNativeStreaming`` on (module scope, for speed);
``TestOutputsThroughRouter`` owns its own stack and comes first, because two stacks may
not be alive at once. ``TestWorkerShutdown`` stops a worker and so comes last.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness import wait_until
from tests.integration.harness.http_stack import (
    MODEL,
    HttpStack,
    Predictor,
    SseStream,
    generate_stream,
    http_stack,
    stream_problems,
)

pytestmark = pytest.mark.integration

#: Generous: the machine has 2 cores shared with other suites.
HTTP_TIMEOUT = httpx.Timeout(60.0)
ENOUGH_CONNECTIONS = httpx.Limits(max_connections=400, max_keepalive_connections=400)
#: A fresh connection per request, so the kernel picks a worker for each.
FRESH = {"Connection": "close"}


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """Predictions from the default tokenizer, the one every process of the stack loads."""
    return Predictor(load_tokenizer())


def _owned_stack(
    request: pytest.FixtureRequest, switchboard_bin: str, log_dir: Path, **options: Any
) -> Iterator[HttpStack]:
    with http_stack(switchboard_bin, log_dir, **options) as stack:
        failures = request.session.testsfailed
        yield stack
        if request.session.testsfailed > failures:
            print(stack.dump_logs())


@pytest.fixture(scope="class")
def router_outputs_stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """A stack whose detokenizers send text through the tokenizer router."""
    log_dir = tmp_path_factory.mktemp("router-outputs-logs")
    yield from _owned_stack(request, switchboard_bin, log_dir, outputs_via="router")


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """The module's stack: 2 workers, 2 detokenizers sending text straight to workers."""
    yield from _owned_stack(request, switchboard_bin, tmp_path_factory.mktemp("stack-logs"))


def lengths(count: int) -> list[int]:
    """``max_new_tokens`` of request ``i``: 8..24, varied."""
    return [8 + (i * 5) % 17 for i in range(count)]


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


class TestOpenAI:
    def test_sdk_streams_read_their_own_text_and_usage(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """200 concurrent streaming completions through the official openai SDK: each
        one's deltas join into its predicted text, finish with length, and the usage
        chunk counts its prompt and completion tokens."""
        count = 200
        sizes = lengths(count)
        prompts = predictor.distinct_prompts(count, sizes, "sdk")

        async def complete(client: openai.AsyncOpenAI, prompt: str, size: int) -> list[str]:
            stream = await client.completions.create(
                model=MODEL,
                prompt=prompt,
                max_tokens=size,
                stream=True,
                stream_options={"include_usage": True},
            )
            parts, reasons, usages = [], [], []
            async for chunk in stream:
                for choice in chunk.choices:
                    parts.append(choice.text)
                    reasons.append(choice.finish_reason)
                if chunk.usage is not None:
                    usages.append(chunk.usage)
            problems = []
            if "".join(parts) != predictor.text(prompt, size):
                problems.append(f"{prompt!r}: {''.join(parts)!r}")
            if reasons[-1] != "length" or any(reasons[:-1]):
                problems.append(f"{prompt!r}: finish reasons {reasons}")
            prompt_tokens = len(predictor.prompt_ids(prompt))
            want = (prompt_tokens, size, prompt_tokens + size)
            got = [(u.prompt_tokens, u.completion_tokens, u.total_tokens) for u in usages]
            if got != [want]:
                problems.append(f"{prompt!r}: usage {got}, want [{want}]")
            return problems

        async def run() -> list[str]:
            client = openai.AsyncOpenAI(
                base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0, timeout=60.0
            )
            try:
                found = await asyncio.gather(
                    *(complete(client, p, n) for p, n in zip(prompts, sizes, strict=True))
                )
            finally:
                await client.close()
            return [problem for problems in found for problem in problems]

        problems = asyncio.run(run())
        assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:10])

    def test_non_streaming_completions_with_n_and_prompt_lists(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """A non-streaming completion of 3 prompts (texts, then token-id lists) with n=2
        has 6 choices, prompt by prompt, each with its predicted text, and exact usage."""
        with openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0) as client:
            for prompts in (["alpha", "beta gamma", "delta"], [[11, 12], [13], [14, 15, 16]]):
                done = client.completions.create(
                    model=MODEL,
                    prompt=prompts,
                    n=2,
                    max_tokens=6,
                )
                assert [c.index for c in done.choices] == list(range(6))
                assert [c.text for c in done.choices] == [
                    predictor.text(prompt, 6) for prompt in prompts for _ in range(2)
                ]
                assert {c.finish_reason for c in done.choices} == {"length"}
                assert done.model == MODEL and done.usage is not None
                prompt_tokens = sum(len(predictor.prompt_ids(p)) for p in prompts)
                assert done.usage.prompt_tokens == prompt_tokens
                assert done.usage.completion_tokens == 6 * 6
                assert done.usage.total_tokens == prompt_tokens + 36

    def test_models_lists_and_retrieves_the_served_model(self, stack: HttpStack) -> None:
        """/v1/models lists the one served model, which the SDK can retrieve by name;
        any other name is a 404 the SDK raises as NotFoundError."""
        with openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0) as client:
            assert [model.id for model in client.models.list()] == [MODEL]
            assert client.models.retrieve(MODEL).id == MODEL
            with pytest.raises(openai.NotFoundError):
                client.models.retrieve("no-such-model")


#: A batch of distinct texts to embed.
EMBED_TEXTS = tuple(f"embed me number {i}, please" for i in range(8))


class TestEmbeddings:
    def test_sdk_embeddings_match_the_rule_in_both_encodings(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """A batch of 8 embeddings through the SDK (its default base64 encoding, then
        float) equals the embedding rule's vectors, in input order, within float32."""
        with openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0) as client:
            texts = list(EMBED_TEXTS)
            answers = (
                client.embeddings.create(model=MODEL, input=texts),  # the SDK asks for base64
                client.embeddings.create(model=MODEL, input=texts, encoding_format="float"),
            )
            for done in answers:
                assert [item.index for item in done.data] == list(range(8))
                for item, text in zip(done.data, EMBED_TEXTS, strict=True):
                    assert item.embedding == pytest.approx(predictor.embedding(text), abs=1e-6)
                tokens = sum(len(predictor.prompt_ids(text)) for text in EMBED_TEXTS)
                assert done.usage.prompt_tokens == tokens

    def test_base64_is_little_endian_float32(self, stack: HttpStack, predictor: Predictor) -> None:
        """encoding_format=base64 carries the vector as little-endian float32 bytes."""
        body = {"model": MODEL, "input": "raw bytes", "encoding_format": "base64"}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            data = client.post("/v1/embeddings", json=body).raise_for_status().json()["data"]
        raw = base64.b64decode(data[0]["embedding"])
        vector = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        assert vector == pytest.approx(predictor.embedding("raw bytes"), abs=1e-6)

    def test_native_encode_one_and_a_batch(self, stack: HttpStack, predictor: Predictor) -> None:
        """/encode embeds one text (an object) and a batch of texts or ids (a list)."""
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            one = client.post("/encode", json={"text": "solo"}).raise_for_status().json()
            assert one["embedding"] == pytest.approx(predictor.embedding("solo"), abs=1e-6)
            assert one["meta_info"]["prompt_tokens"] == len(predictor.prompt_ids("solo"))
            batch = client.post("/encode", json={"text": list(EMBED_TEXTS[:3])}).raise_for_status()
            vectors = [result["embedding"] for result in batch.json()]
            assert vectors == [
                pytest.approx(predictor.embedding(text), abs=1e-6) for text in EMBED_TEXTS[:3]
            ]
            ids = [[1, 2, 3], [40, 50]]
            batch = client.post("/encode", json={"input_ids": ids}).raise_for_status()
            assert [result["embedding"] for result in batch.json()] == [
                pytest.approx(predictor.embedding(prompt), abs=1e-6) for prompt in ids
            ]


def _is_error_body(body: Any, status: int) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and bool(error["message"])
        and error.get("code") in (status, "model_not_found")
    )


#: (name, path, body or raw bytes, content type, expected status)
BAD_REQUESTS: list[tuple[str, str, Any, str, int]] = [
    ("invalid_json", "/generate", b'{"text": "unterminated', "application/json", 400),
    ("invalid_json_openai", "/v1/completions", b"{model: x}", "application/json", 400),
    ("missing_prompt", "/v1/completions", {"model": MODEL}, "application/json", 400),
    ("missing_text", "/generate", {"sampling_params": {}}, "application/json", 400),
    ("text_and_ids", "/generate", {"text": "a", "input_ids": [1]}, "application/json", 400),
    ("id_out_of_vocab", "/generate", {"input_ids": [5, 10**6]}, "application/json", 400),
    ("negative_id", "/v1/completions", {"model": MODEL, "prompt": [-1]}, "application/json", 400),
    (
        "zero_max_new_tokens",
        "/generate",
        {"text": "a", "sampling_params": {"max_new_tokens": 0}},
        "application/json",
        400,
    ),
    (
        "zero_max_tokens",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "max_tokens": 0},
        "",
        400,
    ),
    (
        "longer_than_context",
        "/generate",
        {"input_ids": [7] * 8192, "sampling_params": {"max_new_tokens": 1}},
        "application/json",
        400,
    ),
    ("unknown_model", "/v1/completions", {"model": "gpt-0", "prompt": "a"}, "", 404),
    ("n_zero", "/v1/completions", {"model": MODEL, "prompt": "a", "n": 0}, "", 400),
    ("empty_prompt", "/v1/completions", {"model": MODEL, "prompt": ""}, "", 400),
    ("empty_batch", "/generate", {"text": []}, "application/json", 400),
    ("logprobs", "/v1/completions", {"model": MODEL, "prompt": "a", "logprobs": 2}, "", 400),
    ("not_an_object", "/generate", [1, 2, 3], "application/json", 400),
    ("embedding_unknown_model", "/v1/embeddings", {"model": "x", "input": "a"}, "", 404),
    ("encode_without_input", "/encode", {}, "application/json", 400),
    ("huge_body", "/generate", b"{" + b" " * (17 * 1024 * 1024) + b"}", "application/json", 413),
    (
        "seed_beyond_int64",
        "/generate",
        {"text": "a", "sampling_params": {"seed": 2**70}},
        "application/json",
        400,
    ),
    (
        "stop_token_beyond_int32",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "stop_token_ids": [2**40]},
        "",
        400,
    ),
    ("duplicate_rids_in_batch", "/generate", {"text": ["a", "b"], "rid": ["x", "x"]}, "", 400),
    (
        "text_too_long_to_tokenize",
        "/generate",
        {"text": "word " * 400_000, "sampling_params": {"max_new_tokens": 1}},
        "application/json",
        400,
    ),
]


class TestBadInput:
    @pytest.mark.parametrize(
        ("path", "body", "content_type", "status"),
        [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
    )
    def test_bad_request_answers_an_openai_error(
        self, stack: HttpStack, path: str, body: Any, content_type: str, status: int
    ) -> None:
        """Bad input answers its 4xx status (never 422 or 500) with an OpenAI-style
        {"error": {"message", ...}} body."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content_type else {}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            response = client.post(path, content=content, headers=headers)
        assert response.status_code == status, response.text
        assert _is_error_body(response.json(), status), response.text

    def test_curl_form_content_type_is_read_as_json(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """A JSON body labelled application/x-www-form-urlencoded (curl -d) is served."""
        body = json.dumps({"text": "curl style", "sampling_params": {"max_new_tokens": 5}})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            response = client.post("/generate", content=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["text"] == predictor.text("curl style", 5)

    def test_workers_keep_serving_after_bad_input(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """After every bad request above, both workers still run and answer correctly,
        and each counted its refusals by reason."""
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
            for _, path, body, content_type, _ in BAD_REQUESTS:
                content = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers = {"Content-Type": content_type} if content_type else {}
                assert client.post(path, content=content, headers=headers).status_code < 500
            for i in range(20):
                body = {"text": f"still fine {i}", "sampling_params": {"max_new_tokens": 3}}
                response = client.post("/generate", json=body)
                assert response.json()["text"] == predictor.text(f"still fine {i}", 3)
        stack.assert_running()
        for info in stack.worker_infos().values():
            assert info["worker"]["state"] == "serving"
        rejected: dict[str, int] = {}
        for info in stack.worker_infos().values():
            for reason, count in info["worker"]["counters"].get("http_rejected", {}).items():
                rejected[reason] = rejected.get(reason, 0) + count
        assert {"invalid_request", "invalid_prompt", "model_not_found", "body_too_large"} <= set(
            rejected
        ), rejected


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
