"""The OpenAI surface against the clients that call it: the official ``openai`` SDK (sync
and async), its own response types, and LangChain's ``ChatOpenAI`` built on it, in front
of a whole stack with the built-in engine.

Every answer is validated against the type the SDK ships for it (``Completion``,
``ChatCompletion``, ``ChatCompletionChunk``, ``Model``) with pydantic's validation, not
the SDK's lenient construction, and every text is the engine's, predicted from its rules.
Errors are raised as the SDK's own exception types, with OpenAI's ``code`` and ``param``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from switchboard.text import load_tokenizer
from switchboard.text.chat_template_source import load_chat_template
from switchboard.worker.chat_prompt import ChatEncoder
from tests.integration.harness.http_stack import MODEL, HttpStack
from tests.integration.harness.http_worker import HTTP_TIMEOUT, predictor, stack
from tests.integration.harness.predictor import Predictor

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours."},
    {"role": "assistant", "content": "Red, green, blue."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Two more,"}, {"type": "text", "text": "please."}],
    },
]


def chat_prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    """The ids a worker sends for ``messages``: the built-in tokenizer's default chat
    template (its renderings are held to known ones in the unit tests), with the
    generation prompt."""
    tokenizer = load_tokenizer()
    template = load_chat_template(tokenizer, None, None)
    assert template is not None
    shown = [{**message, "content": _text(message["content"])} for message in messages]
    rendered = template.render(shown, add_generation_prompt=True)
    return ChatEncoder(tokenizer).encode(rendered, [m["content"] for m in shown])


def _text(content: str | list[dict[str, str]]) -> str:
    return content if isinstance(content, str) else "\n".join(part["text"] for part in content)


def raw(stack: HttpStack, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer to one POST, unparsed by the SDK."""
    reply = httpx.post(f"{stack.base_url}{path}", json=body, timeout=HTTP_TIMEOUT, trust_env=False)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def raw_chunks(stack: HttpStack, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data events of one streaming POST, ``[DONE]`` last and dropped."""
    with httpx.stream(
        "POST", f"{stack.base_url}{path}", json=body, timeout=HTTP_TIMEOUT, trust_env=False
    ) as reply:
        assert reply.status_code == 200, reply.read()
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert lines and lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


@pytest.fixture(scope="module")
def client(stack: HttpStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="unused", max_retries=0)


class TestResponseTypes:
    """Raw answers validate against the SDK's types."""

    def test_completion(self, stack: HttpStack, predictor: Predictor) -> None:
        answer = raw(
            stack, "/v1/completions", {"model": MODEL, "prompt": "types", "max_tokens": 5, "n": 2}
        )
        completion = Completion.model_validate(answer)
        assert [choice.text for choice in completion.choices] == [predictor.text("types", 5)] * 2
        assert completion.usage is not None and completion.usage.completion_tokens == 10

    def test_chat_completion(self, stack: HttpStack, predictor: Predictor) -> None:
        body = {"model": MODEL, "messages": CONVERSATION, "max_completion_tokens": 7}
        completion = ChatCompletion.model_validate(raw(stack, "/v1/chat/completions", body))
        ids = chat_prompt_ids(CONVERSATION)
        [choice] = completion.choices
        assert choice.message.role == "assistant"
        assert choice.message.content == predictor.text(ids, 7)
        assert choice.finish_reason == "length"
        assert completion.usage is not None
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (len(ids), 7)

    def test_chat_chunks(self, stack: HttpStack, predictor: Predictor) -> None:
        body = {
            "model": MODEL,
            "messages": CONVERSATION,
            "max_tokens": 6,
            "n": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        chunks = [
            ChatCompletionChunk.model_validate(c)
            for c in raw_chunks(stack, "/v1/chat/completions", body)
        ]
        *streamed, last = chunks
        assert last.choices == [] and last.usage is not None
        assert last.usage.completion_tokens == 12
        for index in (0, 1):
            mine = [c.choices[0] for c in streamed if c.choices[0].index == index]
            assert mine[0].delta.role == "assistant" and mine[0].delta.content == ""
            assert "".join(c.delta.content or "" for c in mine) == predictor.text(
                chat_prompt_ids(CONVERSATION), 6
            )
            assert [c.finish_reason for c in mine][-1] == "length"
            assert not any(c.finish_reason for c in mine[:-1])

    def test_models(self, stack: HttpStack) -> None:
        reply = httpx.get(f"{stack.base_url}/v1/models", timeout=HTTP_TIMEOUT, trust_env=False)
        [card] = reply.json()["data"]
        model = Model.model_validate(card)
        assert model.id == MODEL and card["context_length"] > 0


class TestSdk:
    def test_sync_chat_streaming_and_not(self, client: openai.OpenAI, predictor: Predictor) -> None:
        """chat.completions.create, then the same streamed: the same text."""
        ids = chat_prompt_ids(CONVERSATION)
        answer = client.chat.completions.create(
            model=MODEL, messages=CONVERSATION, max_completion_tokens=9, seed=1
        )  # type: ignore[arg-type]
        assert answer.choices[0].message.content == predictor.text(ids, 9)
        stream = client.chat.completions.create(
            model=MODEL, messages=CONVERSATION, max_completion_tokens=9, stream=True
        )  # type: ignore[arg-type]
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == predictor.text(ids, 9)

    def test_async_chat_concurrently(self, stack: HttpStack, predictor: Predictor) -> None:
        """Twenty async streams at once, each its own conversation's text, usage last."""

        async def one(client: openai.AsyncOpenAI, index: int) -> None:
            messages = [{"role": "user", "content": f"conversation {index}"}]
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=8,
                stream=True,
                stream_options={"include_usage": True},
            )
            parts, usage = [], None
            async for chunk in stream:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                if chunk.usage is not None:
                    usage = chunk.usage
            assert "".join(parts) == predictor.text(chat_prompt_ids(messages), 8)
            assert usage is not None and usage.completion_tokens == 8

        async def run() -> None:
            async with openai.AsyncOpenAI(
                base_url=f"{stack.base_url}/v1", api_key="unused", max_retries=0
            ) as client:
                await asyncio.gather(*(one(client, index) for index in range(20)))

        asyncio.run(run())

    def test_n_samples(self, client: openai.OpenAI) -> None:
        answer = client.chat.completions.create(
            model=MODEL, messages=CONVERSATION, max_tokens=3, n=3
        )  # type: ignore[arg-type]
        assert [choice.index for choice in answer.choices] == [0, 1, 2]
        assert answer.usage is not None and answer.usage.completion_tokens == 9

    def test_default_is_the_served_model(self, client: openai.OpenAI) -> None:
        answer = client.chat.completions.create(
            model="default", messages=CONVERSATION, max_tokens=2
        )  # type: ignore[arg-type]
        assert answer.model == MODEL


class TestSdkErrors:
    """Each refusal is raised as the SDK's own exception, OpenAI's fields filled."""

    @pytest.mark.parametrize(
        ("changes", "param", "says"),
        [
            (
                {
                    "messages": [
                        {
                            "role": "user",
                            "content": [{"type": "image_url", "image_url": {"url": "x"}}],
                        }
                    ]
                },
                "messages",
                "content.0.image_url: not supported by this server: images",
            ),
            ({"messages": [{"role": "wizard", "content": "x"}]}, "messages", "role"),
            ({"messages": []}, "messages", "at least 1"),
            ({"logprobs": True}, "logprobs", "logprobs"),
            ({"logit_bias": {"5": 10}}, "logit_bias", "logit_bias"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "tool calls"),
            ({"response_format": {"type": "json_object"}}, "response_format", "json_object"),
            ({"temperature": 3}, "temperature", "less than or equal to 2"),
            ({"max_completion_tokens": 10**6}, "messages", "exceeds the context length"),
        ],
    )
    def test_bad_requests(
        self, client: openai.OpenAI, changes: dict[str, Any], param: str, says: str
    ) -> None:
        body: dict[str, Any] = {
            "model": MODEL,
            "messages": CONVERSATION,
            "max_tokens": 2,
            **changes,
        }
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(**body)
        error = raised.value
        assert error.status_code == 400 and error.param == param
        assert says in error.message

    def test_context_length_code(self, client: openai.OpenAI) -> None:
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model=MODEL, messages=CONVERSATION, max_tokens=10**6)  # type: ignore[arg-type]
        assert raised.value.code == "context_length_exceeded"

    def test_unknown_model(self, client: openai.OpenAI) -> None:
        with pytest.raises(openai.NotFoundError) as raised:
            client.chat.completions.create(model="gpt-4o", messages=CONVERSATION)  # type: ignore[arg-type]
        assert raised.value.code == "model_not_found" and MODEL in raised.value.message


class TestLangChain:
    """LangChain's ChatOpenAI, the most used client framework on the SDK."""

    def test_invoke_and_stream(
        self, stack: HttpStack, predictor: Predictor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for variable in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_API_KEY"):
            monkeypatch.delenv(variable, raising=False)
        from langchain_core.messages import HumanMessage, SystemMessage
        from langchain_openai import ChatOpenAI

        chat = ChatOpenAI(
            model=MODEL,
            base_url=f"{stack.base_url}/v1",
            api_key="unused",
            max_tokens=6,
            max_retries=0,
        )  # type: ignore[arg-type]
        messages = [SystemMessage("You are terse."), HumanMessage("Name three colours.")]
        ids = chat_prompt_ids(
            [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name three colours."},
            ]
        )
        answer = chat.invoke(messages)
        assert answer.content == predictor.text(ids, 6)
        streamed = "".join(str(part.content) for part in chat.stream(messages))
        assert streamed == predictor.text(ids, 6)
