"""``switchboard up --engine llama-cpp`` on a generated model: real text, exactly.

Every expected text comes from llama-cpp-python's own ``Llama`` decoding each prompt
alone (:class:`tests.support.llama_models.GreedyReference`), decoded to text by the
model's own tokenizer; the stack under test runs the real supervisor, workers,
detokenizers, routers and llama.cpp engine.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard.text import GgufTokenizer, load_tokenizer
from tests.integration.harness.sse import SseStream, generate_stream, stream_problems
from tests.integration.harness.supervisor import Stacks, Supervisor, refuse
from tests.support import llama_vocab
from tests.support.llama_models import GreedyReference, tiny_model

pytestmark = pytest.mark.integration

TOKENS = 24
#: 20 prompts as token ids (BOS first, 3 to 41 tokens) and 4 as text.
ID_PROMPTS = [[1, *range(700 + 13 * i, 700 + 13 * i + 2 + 2 * i)] for i in range(20)]
TEXT_PROMPTS = ["Hello world", "The quick brown fox", "  leading spaces", "naïve café 東京 🦙"]


@pytest.fixture(scope="module")
def reference() -> Iterator[GreedyReference]:
    ref = GreedyReference(tiny_model())
    yield ref
    ref.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Supervisor]:
    owner = Stacks(tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("logs"))
    try:
        yield owner.start(
            *("--engine", "llama-cpp", "--model", str(tiny_model())),
            *("--workers", "2", "--detokenizers", "2"),
            *("--sequences", "16", "--batch-size", "128", "--context-size", "1024"),
        )
    finally:
        problems = owner.close()
        assert not problems, "\n".join(problems)


def admin(stack: Supervisor) -> tuple[str, dict[str, str]]:
    """The admin URL and the operator token of the generated console link."""
    line = stack.stdout().strip()
    match = re.search(r"console (http://[^/\s]+)/#token=([^;\s]+)", line)
    assert match is not None, line
    return match.group(1), {"Authorization": f"Bearer {match.group(2)}"}


def greedy_body(prompt: list[int] | str, tokens: int = TOKENS) -> dict[str, Any]:
    key = "text" if isinstance(prompt, str) else "input_ids"
    params = {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True}
    return {key: prompt, "sampling_params": params}


def expected_text(reference: GreedyReference, prompt: list[int] | str, tokens: int) -> str:
    """The text llama.cpp's server streams for the ids llama.cpp generates alone."""
    ids = reference.text_tokens(prompt) if isinstance(prompt, str) else prompt
    tokenizer = load_tokenizer(tiny_model())
    assert isinstance(tokenizer, GgufTokenizer)
    return llama_vocab.llama_pieces(tokenizer, reference.tokens(ids, tokens))


async def streams(
    url: str, prompts: list[Any], tokens: int = TOKENS, during: Any = None
) -> list[SseStream]:
    """Every prompt streamed at once (greedy, ``tokens`` each); ``during`` (an async
    function of the streams so far) runs once every stream has had a few events (at most
    30 s later)."""
    seen = [SseStream() for _ in prompts]
    async with httpx.AsyncClient(base_url=url, timeout=90) as client:
        tasks = [
            asyncio.create_task(generate_stream(client, greedy_body(prompt, tokens), into=one))
            for prompt, one in zip(prompts, seen, strict=True)
        ]
        if during is not None:
            async with asyncio.timeout(30):
                while not all(len(one.events) >= 3 or one.done for one in seen):
                    await asyncio.sleep(0.005)
            await during(seen)
        await asyncio.gather(*tasks)
    return seen


def check_exact(
    reference: GreedyReference, prompts: list[Any], seen: list[SseStream], tokens: int = TOKENS
) -> int:
    """How many streams ended well with their exact text (asserting each)."""
    for prompt, one in zip(prompts, seen, strict=True):
        assert one.events, (prompt, one.status, one.error)
        rid = one.events[0]["meta_info"]["id"]
        problems = stream_problems(one, rid, expected_text(reference, prompt, tokens), tokens)
        assert not problems, (prompt, problems)
    return len(seen)


class TestExactness:
    def test_concurrent_greedy_streams_equal_each_prompt_alone(
        self, stack: Supervisor, reference: GreedyReference
    ) -> None:
        """24 concurrent greedy streams (20 id prompts, 4 text prompts) each end with the
        text llama.cpp makes of its prompt alone, with every token counted."""
        prompts: list[Any] = [*ID_PROMPTS, *TEXT_PROMPTS]
        seen = asyncio.run(streams(stack.url, prompts))
        assert check_exact(reference, prompts, seen) == 24

    @pytest.mark.parametrize("mode", ["in_place", "retract"])
    def test_a_pause_mid_stream_changes_no_text(
        self, stack: Supervisor, reference: GreedyReference, mode: str
    ) -> None:
        """Streams paused mid-way (in_place, retract) and continued end exactly as alone."""
        admin_url, headers = admin(stack)
        answers: list[httpx.Response] = []
        tokens_at_pause: list[int] = []

        async def pause_and_continue(seen: list[SseStream]) -> None:
            tokens_at_pause.extend(one.completion_tokens for one in seen)
            async with httpx.AsyncClient(base_url=admin_url, headers=headers, timeout=30) as api:
                answers.append(await api.post("/api/pause", json={"mode": mode}))
                answers.append(await api.post("/api/continue", json={}))

        prompts: list[Any] = ID_PROMPTS[:8]
        seen = asyncio.run(streams(stack.url, prompts, 240, during=pause_and_continue))
        assert [answer.status_code for answer in answers] == [200, 200], answers[0].text
        assert all(0 < count < 240 for count in tokens_at_pause), tokens_at_pause
        assert check_exact(reference, prompts, seen, 240) == 8


class TestLimits:
    def test_a_prompt_beyond_the_engines_context_is_a_400_naming_both(
        self, stack: Supervisor
    ) -> None:
        """Workers learn the context (1024) from the engine: a longer request is a 400."""
        info = httpx.get(f"{stack.url}/get_model_info", timeout=10).json()
        assert info["context_length"] == 1024
        body = {"input_ids": [1] * 1000, "sampling_params": {"max_new_tokens": 100}}
        answer = httpx.post(f"{stack.url}/generate", json=body, timeout=30)
        assert answer.status_code == 400
        message = answer.json()["error"]["message"]
        assert "(1000 tokens)" in message and "1024 tokens" in message

    def test_the_admin_api_shows_the_kv_cache(self, stack: Supervisor) -> None:
        """GET /api/load: the engine's KV cells from its real state, all free when idle
        (every finished stream's cells were freed), and its context length."""
        admin_url, headers = admin(stack)
        load = httpx.get(f"{admin_url}/api/load", headers=headers, timeout=10).json()["load"]
        assert (load["kv_cells_total"], load["context_length"]) == (1024, 1024), load
        assert (load["kv_cells_used"], load["running"], load["waiting"]) == (0, 0, 0), load
        assert load["max_running"] == 16 and load["tokens_per_s"] >= 0
        assert load["features"] == ["logprobs", "logit_bias"], load
        assert load["engine_started_ns"] > 0, load

    def test_the_model_name_is_the_files(self, stack: Supervisor) -> None:
        """Unless named, the workers serve the model under its file's name."""
        models = httpx.get(f"{stack.url}/v1/models", timeout=10).json()["data"]
        assert [model["id"] for model in models] == [tiny_model().name.removesuffix(".gguf")]
        assert models[0]["max_model_len"] == 1024


class TestLogprobs:
    """The engine lists the logprobs feature, so the workers serve them."""

    def test_generate_returns_each_tokens_logprob_and_alternatives(
        self, stack: Supervisor, reference: GreedyReference
    ) -> None:
        """Greedy /generate with return_logprob and top_logprobs_num 3: one entry per
        token, the ids llama.cpp generates alone, each chosen logprob the best of its
        alternatives (greedy), alternatives best first, texts the tokens' own."""
        prompt = ID_PROMPTS[3]
        body = {**greedy_body(prompt, 12), "return_logprob": True, "top_logprobs_num": 3}
        body["return_text_in_logprobs"] = True
        answer = httpx.post(f"{stack.url}/generate", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        meta = answer.json()["meta_info"]
        chosen, tops = meta["output_token_logprobs"], meta["output_top_logprobs"]
        assert [entry[1] for entry in chosen] == reference.tokens(prompt, 12)
        tokenizer = load_tokenizer(tiny_model())
        for (value, token_id, text), alternatives in zip(chosen, tops, strict=True):
            assert value <= 0 and text == llama_vocab.llama_pieces(tokenizer, [token_id])
            assert len(alternatives) == 3 and alternatives[0][1] == token_id
            assert alternatives[0][0] == pytest.approx(value)
            values = [entry[0] for entry in alternatives]
            assert values == sorted(values, reverse=True)

    def test_completions_logprobs_through_the_sdk(self, stack: Supervisor) -> None:
        """OpenAI's legacy logprobs, validated by the SDK's own Completion type."""
        from openai.types import Completion

        model = tiny_model().name.removesuffix(".gguf")
        body = {"model": model, "prompt": "Hello world", "max_tokens": 6, "temperature": 0}
        body["logprobs"] = 2
        answer = httpx.post(f"{stack.url}/v1/completions", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        completion = Completion.model_validate(answer.json())
        [choice] = completion.choices
        assert choice.logprobs is not None and choice.logprobs.tokens is not None
        assert len(choice.logprobs.tokens) == 6
        assert choice.logprobs.top_logprobs is not None
        assert all(len(top) <= 2 for top in choice.logprobs.top_logprobs)


class TestLogitBias:
    """The engine lists logit_bias, so every API's logit_bias reaches its sampler."""

    def test_generate_bans_and_forces_tokens(
        self, stack: Supervisor, reference: GreedyReference
    ) -> None:
        """Greedy /generate: -100 on the greedy first token gives another first token;
        +100 on a token makes every token that one; both reported by the token ids."""
        prompt = ID_PROMPTS[6]
        plain = reference.tokens(prompt, 6)
        forced = next(t for t in range(300, 400) if t not in plain)
        tokens = {}
        for name, bias in (("ban", {str(plain[0]): -100}), ("force", {str(forced): 100})):
            body = greedy_body(prompt, 6)
            body["sampling_params"]["logit_bias"] = bias
            body["return_logprob"] = True
            answer = httpx.post(f"{stack.url}/generate", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            tokens[name] = [
                entry[1] for entry in answer.json()["meta_info"]["output_token_logprobs"]
            ]
        assert tokens["ban"][0] != plain[0]
        assert tokens["force"] == [forced] * 6

    def test_chat_through_the_sdk(self, stack: Supervisor) -> None:
        """The openai SDK's logit_bias on a chat: a forced token is the whole answer; a
        token outside the vocabulary is the SDK's BadRequestError naming the field."""
        import openai

        tokenizer = load_tokenizer(tiny_model())
        assert isinstance(tokenizer, GgufTokenizer)
        forced = next(
            t for t in range(300, 400) if llama_vocab.llama_pieces(tokenizer, [t]).isalpha()
        )
        client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0)
        model = tiny_model().name.removesuffix(".gguf")
        answer = client.chat.completions.create(
            model=model,
            messages=CONVERSATIONS[0],  # type: ignore[arg-type]
            max_tokens=4,
            temperature=0,
            logit_bias={str(forced): 100},
        )
        piece = llama_vocab.llama_pieces(tokenizer, [forced])
        assert answer.choices[0].message.content == piece * 4
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=model,
                messages=CONVERSATIONS[0],  # type: ignore[arg-type]
                max_tokens=4,
                logit_bias={str(tokenizer.vocab_size): 5},
            )
        assert caught.value.param == "logit_bias" and "vocabulary" in caught.value.message


#: Conversations whose greedy answers on the tiny model are whole UTF-8 text (the
#: server drops bytes that are not, so only such answers can be compared as text).
CONVERSATIONS = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],
    [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ],
]


class TestChat:
    """The model's own chat template (from its GGUF) behind /v1/chat/completions."""

    def test_greedy_chat_equals_llama_cpp_servers(self, stack: Supervisor) -> None:
        """The same model, messages and greedy sampling through llama-cpp-python's own
        OpenAI server: the same content, finish and token counts."""
        from openai.types.chat import ChatCompletion

        from switchboard.bench.engine_stacks import ServerStack

        model = tiny_model().name.removesuffix(".gguf")
        server = ServerStack(tiny_model(), model, threads=1, n_ctx=1024)
        server.launch()
        try:
            for messages in CONVERSATIONS:
                body = {"model": model, "messages": messages, "max_tokens": 8, "temperature": 0}
                ours = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=60)
                # llama.cpp's server applies a repeat penalty of 1.1 unless told not to.
                theirs = httpx.post(
                    f"{server.base_url}/v1/chat/completions",
                    json={**body, "repeat_penalty": 1.0},
                    timeout=60,
                )
                assert ours.status_code == 200, ours.text
                mine, reference = (
                    ChatCompletion.model_validate(answer.json()) for answer in (ours, theirs)
                )
                assert mine.choices[0].message.content == reference.choices[0].message.content
                assert mine.choices[0].finish_reason == reference.choices[0].finish_reason
                assert mine.usage == reference.usage
        finally:
            server.stop()

    def test_chat_logprobs_through_the_sdk(self, stack: Supervisor) -> None:
        """logprobs with top_logprobs 2: one entry per token, as the SDK's types say."""
        import openai

        client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0)
        answer = client.chat.completions.create(
            model=tiny_model().name.removesuffix(".gguf"),
            messages=CONVERSATIONS[0],  # type: ignore[arg-type]
            max_tokens=5,
            temperature=0,
            logprobs=True,
            top_logprobs=2,
        )
        [choice] = answer.choices
        assert choice.logprobs is not None and choice.logprobs.content is not None
        assert len(choice.logprobs.content) == 5
        assert all(len(entry.top_logprobs) == 2 for entry in choice.logprobs.content)


class TestRefusals:
    def test_a_missing_or_foreign_model_is_one_line(self, tmp_path: Path) -> None:
        """up refuses a model that does not exist or is not GGUF, naming the file."""
        missing = refuse(tmp_path, "--engine", "llama-cpp", "--model", str(tmp_path / "no.gguf"))
        assert str(tmp_path / "no.gguf") in missing
        text = tmp_path / "notes.gguf"
        text.write_text("not a model")
        foreign = refuse(tmp_path, "--engine", "llama-cpp", "--model", str(text))
        assert str(text) in foreign and "GGUF" in foreign

    def test_settings_of_the_other_engine_are_refused(self, tmp_path: Path) -> None:
        """--model without llama-cpp, or a sim-only setting with it, is refused."""
        assert "only for engine llama-cpp" in refuse(tmp_path, "--model", str(tiny_model()))
        line = refuse(
            tmp_path, "--engine", "llama-cpp", "--model", str(tiny_model()), "--step-time-s", "1"
        )
        assert "step_time_s: only for engine sim" in line
