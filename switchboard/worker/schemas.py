"""Request bodies of the worker's endpoints, validated by pydantic.

Field names follow SGLang (``/generate``, ``/encode``) and the OpenAI API
(``/v1/completions``, ``/v1/embeddings``). Every body refuses a field it does not name
(400, the message naming the field), so a misspelt parameter is never silently lost.
Fields that standard clients send but this stack does not act on are named anyway, in
one of two ways:

* **passed to the engine**: sampling knobs an engine applies if it samples for real
  (penalties and ``min_p``: the llama.cpp engine does; the simulated engine does not);
* **accepted and ignored** (their description says so): ``logit_bias``, hints for a
  router or a scheduler (``priority``, ``data_parallel_rank``), and details of output
  this stack never returns (``top_logprobs_num`` without ``return_logprob``);
* **not supported** (marked :class:`NotSupported`): fields whose meaning this stack cannot
  honour (logprobs, images, LoRA adapters, constrained decoding). They are accepted at
  their default and refused with a 400 ``not supported by this server: …`` otherwise.

``null`` is as good as leaving a field out (OpenAI's and SGLang's optional fields are
nullable), so a client that sends ``"n": null`` gets the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "CompletionBody",
    "EmbeddingBody",
    "EncodeBody",
    "GenerateBody",
    "NativeSamplingParams",
    "NotSupported",
    "StreamOptions",
]

#: Bounds for integers that travel as MessagePack ints: a larger one would overflow the
#: encoder (a 500) instead of being refused (a 400).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: Longest request id a client may choose: it travels with every output row of its request.
MAX_RID_CHARS = 256

TokenIds = list[Annotated[int, Field(ge=0, le=INT32_MAX)]]
Rid = Annotated[str, Field(max_length=MAX_RID_CHARS)]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Seed = Annotated[int, Field(ge=-INT64_MAX, le=INT64_MAX)]
Penalty = Annotated[
    float, Field(ge=-2, le=2, description="passed to the engine (the llama.cpp engine applies it)")
]
#: One prompt or a batch of them: text, texts, token ids, or lists of token ids.
PromptInput = str | list[str] | TokenIds | list[TokenIds]
#: SGLang's per-prompt forms: one value for every prompt, or one per prompt.
OneOrEach = str | list[str | None]
#: SGLang's multimodal inputs (a URL, a file name, base64, or lists of them).
Media = str | list[Any] | dict[str, Any]


@dataclass(frozen=True)
class NotSupported:
    """Marks a field this stack cannot honour: accepted at its default, refused (400
    ``not supported by this server: <what>``) otherwise. A list whose every item is the
    default (SGLang's one-per-prompt form) counts as the default."""

    what: str

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        shown = handler(schema)
        shown["description"] = f"not supported ({self.what}): only the default is accepted"
        return shown


def _is_default(value: Any, default: Any) -> bool:
    if value == default:
        return True
    if default is None and value in ("", {}, []):
        return True
    return isinstance(value, list) and all(_is_default(item, default) for item in value)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic refuses it with its own message
        # Only named fields: an unknown one is refused even when null.
        known = cls.model_fields.keys()
        return {key: value for key, value in data.items() if value is not None or key not in known}

    @field_validator("*")
    @classmethod
    def _refuse_unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        field = cls.model_fields[info.field_name]
        for mark in field.metadata:
            if isinstance(mark, NotSupported) and not _is_default(value, field.default):
                raise PydanticCustomError(
                    "not_supported", "not supported by this server: {what}", {"what": mark.what}
                )
        return value


class NativeSamplingParams(_Body):
    """SGLang's ``sampling_params``; ``sampling_seed`` is SGLang's newer name of ``seed``."""

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
    seed: Seed | None = Field(default=None, validation_alias=AliasChoices("seed", "sampling_seed"))
    min_p: Annotated[float, Field(ge=0, le=1, description="passed to the engine")] = 0.0
    frequency_penalty: Penalty = 0.0
    presence_penalty: Penalty = 0.0
    repetition_penalty: Annotated[float, Field(gt=0, le=2, description="passed to the engine")] = (
        1.0
    )
    logit_bias: Annotated[dict[str, float], Field(description="accepted and ignored")] = {}
    stream_interval: Annotated[
        int, Field(ge=1, description="accepted and ignored: every output is streamed")
    ] = 1
    n: Annotated[int, NotSupported("parallel sampling; send the prompt n times")] = 1
    stop_regex: Annotated[str | list[str] | None, NotSupported("stop regexes")] = None
    json_schema: Annotated[str | None, NotSupported("constrained decoding")] = None
    regex: Annotated[str | None, NotSupported("constrained decoding")] = None
    ebnf: Annotated[str | None, NotSupported("constrained decoding")] = None
    structural_tag: Annotated[str | None, NotSupported("constrained decoding")] = None
    custom_params: Annotated[dict[str, Any] | None, NotSupported("custom logit processors")] = None


class _NativeBody(_Body):
    """What ``/generate`` and ``/encode`` share: one prompt kind, media, LoRA, hints."""

    text: str | list[str] | None = None
    input_ids: TokenIds | list[TokenIds] | None = None
    rid: Rid | list[Rid] | None = None
    image_data: Annotated[Media | None, NotSupported("images; this stack serves text")] = None
    video_data: Annotated[Media | None, NotSupported("video; this stack serves text")] = None
    audio_data: Annotated[Media | None, NotSupported("audio; this stack serves text")] = None
    modalities: Annotated[list[str] | None, NotSupported("modalities other than text")] = None
    lora_path: Annotated[OneOrEach | None, NotSupported("LoRA adapters")] = None
    log_metrics: Annotated[bool, Field(description="accepted and ignored")] = True
    priority: Annotated[int | None, Field(description="accepted and ignored")] = None

    @model_validator(mode="after")
    def _one_prompt_kind(self) -> Self:
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of text and input_ids")
        return self


#: A routing hint of SGLang's gateways; the Switchboard router picks the engine itself.
RoutingHint = Annotated[
    int | None, Field(description="accepted and ignored: the router places every request")
]
#: A detail of logprobs, which ``return_logprob`` (refused) would return.
LogprobDetail = Field(description="accepted and ignored: no logprobs are returned")


class GenerateBody(_NativeBody):
    """SGLang's ``POST /generate``: exactly one of ``text`` and ``input_ids``."""

    sampling_params: NativeSamplingParams | list[NativeSamplingParams] = Field(
        default_factory=NativeSamplingParams
    )
    stream: bool = False
    return_logprob: Annotated[bool | list[bool], NotSupported("logprobs")] = False
    logprob_start_len: Annotated[int | list[int] | None, LogprobDetail] = None
    top_logprobs_num: Annotated[int | list[int] | None, LogprobDetail] = None
    token_ids_logprob: Annotated[TokenIds | list[TokenIds] | None, LogprobDetail] = None
    return_text_in_logprobs: Annotated[bool, LogprobDetail] = False
    input_embeds: Annotated[list[Any] | None, NotSupported("input embeddings")] = None
    return_hidden_states: Annotated[
        bool | str | list[bool | str], NotSupported("hidden states")
    ] = False
    session_params: Annotated[dict[str, Any] | None, NotSupported("sessions")] = None
    custom_logit_processor: Annotated[OneOrEach | None, NotSupported("custom logit processors")] = (
        None
    )
    bootstrap_host: Annotated[OneOrEach | None, NotSupported("prefill-decode disaggregation")] = (
        None
    )
    bootstrap_port: Annotated[
        int | list[int | None] | None, NotSupported("prefill-decode disaggregation")
    ] = None
    bootstrap_room: Annotated[
        int | list[int | None] | None, NotSupported("prefill-decode disaggregation")
    ] = None
    data_parallel_rank: RoutingHint = None
    routed_dp_rank: RoutingHint = None


class EncodeBody(_NativeBody):
    """SGLang's ``POST /encode``: embed ``text`` or ``input_ids`` (one or a batch)."""

    sampling_params: Annotated[
        dict[str, Any] | list[dict[str, Any]] | None,
        Field(description="accepted and ignored, as SGLang does: embedding samples nothing"),
    ] = None
    dimensions: Annotated[int | None, NotSupported("dimensions: the engine has one size")] = None


class StreamOptions(_Body):
    """OpenAI ``stream_options``."""

    include_usage: bool = False
    include_obfuscation: Annotated[
        bool, Field(description="accepted and ignored: chunks carry no obfuscation padding")
    ] = False
    continuous_usage_stats: Annotated[bool, NotSupported("usage in every chunk")] = False


class CompletionBody(_Body):
    """OpenAI ``POST /v1/completions`` (plus SGLang's extensions such as ``ignore_eos``).

    ``best_of`` is accepted only equal to ``n`` (choosing among samples needs logprobs)."""

    model: str
    prompt: PromptInput
    max_tokens: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = 16
    min_tokens: Count = 0
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    #: At most the worker's ``max_n`` (a setting, so checked by the endpoint).
    n: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    best_of: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    echo: bool = False
    logprobs: Annotated[int, Field(ge=0), NotSupported("logprobs other than 0")] = 0
    seed: Seed | None = None
    user: str | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    frequency_penalty: Penalty = 0.0
    presence_penalty: Penalty = 0.0
    logit_bias: Annotated[dict[str, float], Field(description="accepted and ignored")] = {}
    suffix: Annotated[str | None, NotSupported("a suffix (insertion)")] = None
    top_k: Annotated[
        int, Field(ge=-1, le=INT32_MAX, description="SGLang's; passed to the engine")
    ] = -1
    min_p: Annotated[float, Field(ge=0, le=1, description="SGLang's; passed to the engine")] = 0.0
    repetition_penalty: Annotated[
        float, Field(gt=0, le=2, description="SGLang's; passed to the engine")
    ] = 1.0
    spaces_between_special_tokens: Annotated[
        bool, Field(description="SGLang's; passed to the engine and the detokenizer")
    ] = True
    priority: Annotated[int | None, Field(description="SGLang's; accepted and ignored")] = None
    stop_regex: Annotated[str | list[str] | None, NotSupported("stop regexes")] = None
    json_schema: Annotated[str | None, NotSupported("constrained decoding")] = None
    regex: Annotated[str | None, NotSupported("constrained decoding")] = None
    ebnf: Annotated[str | None, NotSupported("constrained decoding")] = None
    response_format: Annotated[dict[str, Any] | None, NotSupported("constrained decoding")] = None
    lora_path: Annotated[OneOrEach | None, NotSupported("LoRA adapters")] = None

    @field_validator("best_of")
    @classmethod
    def _best_of_is_n(cls, best_of: int, info: ValidationInfo) -> int:
        n = info.data.get("n", 1)  # validated first: declared before best_of
        if best_of != n:
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: best_of other than n ({n}); choosing among "
                "samples needs logprobs",
                {"n": n},
            )
        return best_of


class EmbeddingBody(_Body):
    """OpenAI ``POST /v1/embeddings``."""

    model: str
    input: PromptInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int | None, NotSupported("dimensions: the engine has one size")] = None
    user: str | None = None
