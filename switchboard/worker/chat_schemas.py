"""The body of ``POST /v1/chat/completions``: OpenAI's fields, and SGLang's extensions.

The rules every body follows (unknown fields ignored and counted, ``null`` as absent,
:class:`~switchboard.worker.body_base.NotSupported`) are :mod:`~switchboard.worker.
body_base`'s. Messages take the roles ``system``, ``developer``, ``user``, ``assistant``
and ``tool``, their content a string or a list of text parts; the deprecated
``function`` role and parts other than text (images, audio, files) are refused naming
what they are. Tools reach the chat template, but a tool call cannot be returned: the
output is not parsed for calls, so ``tool_choice`` other than ``none`` is refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from switchboard.worker.body_base import (
    INT32_MAX,
    Body,
    Count,
    NotSupported,
    Penalty,
    Seed,
    TokenIds,
)
from switchboard.worker.logprobs import MAX_TOP_LOGPROBS
from switchboard.worker.schemas import LogitBias, ResponseFormat, StreamOptions

__all__ = ["ChatBody", "ChatMessage", "ContentPart"]

Ignored = Field(description="accepted and ignored")
#: Most messages one request may hold (each is rendered by the chat template).
MAX_MESSAGES = 4096


class ContentPart(Body):
    """One part of a message's content: only ``text`` parts (and an assistant's
    ``refusal``) are served."""

    location = "messages.content"

    type: str
    text: str | None = None
    refusal: str | None = None
    image_url: Annotated[Any, NotSupported("images; this stack serves text")] = None
    input_audio: Annotated[Any, NotSupported("audio; this stack serves text")] = None
    file: Annotated[Any, NotSupported("files; this stack serves text")] = None

    @model_validator(mode="after")
    def _text_only(self) -> Self:
        if self.type not in ("text", "refusal"):
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: {kind} content; this stack serves text",
                {"kind": self.type},
            )
        if (self.text if self.type == "text" else self.refusal) is None:
            raise ValueError(f"a {self.type} part needs its {self.type} field")
        return self


class ChatMessage(Body):
    """One message of the conversation."""

    location = "messages"

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    refusal: Annotated[str | None, Field(description="honoured: given to the template")] = None
    #: SGLang's: an assistant turn's reasoning, which some templates render.
    reasoning_content: Annotated[
        str | None, Field(description="honoured: given to the template")
    ] = None
    function_call: Annotated[
        dict[str, Any] | None, NotSupported("function_call (deprecated): use tool_calls")
    ] = None
    audio: Annotated[dict[str, Any] | None, NotSupported("audio")] = None

    @model_validator(mode="after")
    def _fits_its_role(self) -> Self:
        if self.role == "function":
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: the function role (deprecated); use tool",
                {},
            )
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs tool_call_id")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(f"a {self.role} message needs content")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an assistant message has tool_calls")
        return self

    def text(self) -> str | None:
        """The content as one string: text parts joined with newlines (as servers do for
        templates that take a string), None when there is none."""
        if self.content is None or isinstance(self.content, str):
            return self.content
        return "\n".join(
            (part.text if part.type == "text" else part.refusal) or "" for part in self.content
        )


class ChatBody(Body):
    """OpenAI ``POST /v1/chat/completions`` (plus SGLang's extensions such as ``top_k``)."""

    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    max_tokens: (
        Annotated[
            int, Field(ge=1, le=INT32_MAX, description="honoured: max_completion_tokens' old name")
        ]
        | None
    ) = None
    max_completion_tokens: (
        Annotated[
            int,
            Field(
                ge=1,
                le=INT32_MAX,
                description="honoured: by default default_max_new_tokens, or the context left",
            ),
        ]
        | None
    ) = None
    min_tokens: Count = 0
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    #: At most the worker's ``max_n`` (a setting, so checked by the endpoint).
    n: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    seed: Seed | None = None
    frequency_penalty: Penalty = 0.0
    presence_penalty: Penalty = 0.0
    user: Annotated[str | None, Ignored] = None
    response_format: ResponseFormat | None = None
    #: Before ``tools``, so that the check of ``tools`` sees it.
    tool_choice: Annotated[
        str | dict[str, Any] | None,
        Field(description="honoured: only none (the output is not parsed for tool calls)"),
    ] = None
    tools: Annotated[
        list[dict[str, Any]] | None,
        Field(description="honoured: given to the template, with tool_choice none"),
    ] = None
    parallel_tool_calls: Annotated[bool | None, Ignored] = None
    metadata: Annotated[dict[str, Any] | None, Ignored] = None
    store: Annotated[bool | None, Field(description="accepted and ignored: nothing is stored")] = (
        None
    )
    service_tier: Annotated[str | None, Ignored] = None
    prompt_cache_key: Annotated[str | None, Ignored] = None
    prompt_cache_retention: Annotated[str | None, Ignored] = None
    prompt_cache_options: Annotated[dict[str, Any] | None, Ignored] = None
    safety_identifier: Annotated[str | None, Ignored] = None
    moderation: Annotated[Any, Ignored] = None
    logit_bias: Annotated[dict[str, float] | None, Field(description=LogitBias)] = None
    logprobs: Annotated[
        bool,
        Field(description="honoured: with an engine that produces logprobs (llama.cpp)"),
    ] = False
    top_logprobs: Annotated[
        int | None,
        Field(ge=0, le=MAX_TOP_LOGPROBS, description="honoured: with logprobs, at most 20"),
    ] = None
    modalities: Annotated[list[str] | None, Field(description="honoured: only text")] = None
    audio: Annotated[dict[str, Any] | None, NotSupported("audio output")] = None
    prediction: Annotated[dict[str, Any] | None, NotSupported("predicted outputs")] = None
    reasoning_effort: Annotated[str | None, NotSupported("reasoning effort")] = None
    verbosity: Annotated[str | None, NotSupported("verbosity")] = None
    web_search_options: Annotated[dict[str, Any] | None, NotSupported("web search")] = None
    functions: Annotated[list[Any] | None, NotSupported("functions (deprecated): use tools")] = None
    function_call: Annotated[Any, NotSupported("function_call (deprecated): use tools")] = None
    # SGLang's extensions, as its /v1/chat/completions takes them.
    top_k: Annotated[int, Field(ge=-1, le=INT32_MAX, description="passed to the engine")] = -1
    min_p: Annotated[float, Field(ge=0, le=1, description="passed to the engine")] = 0.0
    repetition_penalty: Annotated[float, Field(gt=0, le=2, description="passed to the engine")] = (
        1.0
    )
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    continue_final_message: Annotated[
        bool, Field(description="honoured: the last (assistant) message is left open")
    ] = False
    add_generation_prompt: bool = True
    chat_template_kwargs: Annotated[
        dict[str, Any] | None, Field(description="honoured: more variables for the template")
    ] = None
    rid: Annotated[str | None, Ignored] = None
    priority: Annotated[int | None, Ignored] = None
    separate_reasoning: Annotated[bool, Ignored] = True
    stream_reasoning: Annotated[bool, Ignored] = True
    regex: Annotated[str | None, NotSupported("constrained decoding")] = None
    ebnf: Annotated[str | None, NotSupported("constrained decoding")] = None
    json_schema: Annotated[str | None, NotSupported("constrained decoding")] = None
    lora_path: Annotated[str | None, NotSupported("LoRA adapters")] = None

    @field_validator("modalities")
    @classmethod
    def _text_output(cls, modalities: list[str]) -> list[str]:
        if any(modality != "text" for modality in modalities):
            raise PydanticCustomError(
                "not_supported", "not supported by this server: output other than text", {}
            )
        return modalities

    @field_validator("tool_choice")
    @classmethod
    def _no_tool_calls(cls, choice: str | dict[str, Any]) -> str | dict[str, Any]:
        if choice != "none":
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: tool calls (the output is not parsed for "
                "them); send tool_choice none, or no tools",
                {},
            )
        return choice

    @field_validator("tools")
    @classmethod
    def _tools_need_no_calls(
        cls, tools: list[dict[str, Any]], info: ValidationInfo
    ) -> list[dict[str, Any]]:
        if tools and info.data.get("tool_choice") is None:
            # OpenAI's default with tools is "auto": calls this stack cannot return.
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: tool calls (the output is not parsed for "
                "them); with tools, send tool_choice none",
                {},
            )
        return tools

    @model_validator(mode="after")
    def _final_message_to_continue(self) -> Self:
        if self.continue_final_message and self.messages[-1].role != "assistant":
            raise ValueError("continue_final_message needs an assistant message last")
        return self

    @property
    def max_new_tokens(self) -> int | None:
        """``max_completion_tokens``, else ``max_tokens`` (its deprecated name)."""
        return self.max_completion_tokens or self.max_tokens
