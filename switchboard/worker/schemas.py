"""Request bodies of the worker's endpoints, validated by pydantic.

Field names follow SGLang (``/generate``, ``/encode``) and the OpenAI API
(``/v1/completions``, ``/v1/embeddings``). Fields a client may send that this stack
does not act on (sampling penalties, for instance) are accepted and ignored, as serving
stacks do; fields whose meaning it cannot honour (logprobs) are refused with 400.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CompletionBody",
    "EmbeddingBody",
    "EncodeBody",
    "GenerateBody",
    "NativeSamplingParams",
    "StreamOptions",
]

#: Bounds for integers that travel as MessagePack ints: a larger one would overflow the
#: encoder (a 500) instead of being refused (a 400).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

TokenIds = list[Annotated[int, Field(ge=0, le=INT32_MAX)]]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Seed = Annotated[int, Field(ge=-INT64_MAX, le=INT64_MAX)]
#: One prompt or a batch of them: text, texts, token ids, or lists of token ids.
PromptInput = str | list[str] | TokenIds | list[TokenIds]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NativeSamplingParams(_Body):
    """SGLang's ``sampling_params``."""

    max_new_tokens: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    min_new_tokens: Count = 0
    temperature: Annotated[float, Field(ge=0)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: Annotated[int, Field(ge=-1, le=INT32_MAX)] = -1
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: Seed | None = None


class GenerateBody(_Body):
    """SGLang's ``POST /generate``: exactly one of ``text`` and ``input_ids``."""

    text: str | list[str] | None = None
    input_ids: TokenIds | list[TokenIds] | None = None
    sampling_params: NativeSamplingParams | list[NativeSamplingParams] = Field(
        default_factory=NativeSamplingParams
    )
    stream: bool = False
    rid: str | list[str] | None = None
    return_logprob: Literal[False] = False

    @model_validator(mode="after")
    def _one_prompt_kind(self) -> Self:
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of text and input_ids")
        return self


class EncodeBody(_Body):
    """SGLang's ``POST /encode``: embed ``text`` or ``input_ids`` (one or a batch)."""

    text: str | list[str] | None = None
    input_ids: TokenIds | list[TokenIds] | None = None
    rid: str | list[str] | None = None

    @model_validator(mode="after")
    def _one_prompt_kind(self) -> Self:
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of text and input_ids")
        return self


class StreamOptions(_Body):
    """OpenAI ``stream_options``."""

    include_usage: bool = False


class CompletionBody(_Body):
    """OpenAI ``POST /v1/completions`` (plus SGLang's extensions such as ``ignore_eos``)."""

    model: str
    prompt: PromptInput
    max_tokens: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = 16
    min_tokens: Count = 0
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    n: Annotated[int, Field(ge=1, le=16)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    echo: bool = False
    logprobs: Literal[0] | None = None
    seed: Seed | None = None
    user: str | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False


class EmbeddingBody(_Body):
    """OpenAI ``POST /v1/embeddings``."""

    model: str
    input: PromptInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: None = None
    user: str | None = None
