"""HTTP workers' OpenAI API in a whole stack (see ``test_http_worker.py``), driven by the
official ``openai`` SDK and httpx: streaming and batched completions, models, and
embeddings, each checked against the engine's token and embedding rules.
"""

from __future__ import annotations

import asyncio
import base64
import struct

import httpx
import openai
import pytest

from tests.integration.harness.http_stack import MODEL, HttpStack
from tests.integration.harness.http_worker import (
    HTTP_TIMEOUT,
    lengths,
    predictor,
    stack,
)
from tests.integration.harness.predictor import Predictor

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]


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
