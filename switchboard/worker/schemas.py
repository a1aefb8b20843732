"""Request bodies of the worker's endpoints, validated by pydantic.

Field names follow SGLang (``/generate``, ``/encode``: every field of SGLang's
``GenerateReqInput`` and ``SamplingParams`` is named) and the OpenAI API
(``/v1/completions``, ``/v1/embeddings``). The rules every body follows (unknown
fields, ``null``, :class:`~switchboard.worker.body_base.NotSupported`) are
:mod:`switchboard.worker.body_base`'s. Each field this stack does not act on says so in
its description, one of:

* **passed to the engine**: sampling knobs an engine applies if it samples for real
  (penalties and ``min_p``: the llama.cpp engine does; the simulated engine does not);
* **accepted and ignored**: hints for a router or a scheduler (``priority``,
  ``routed_dp_rank``…), metadata (``conversation_id``, ``custom_labels``…), and details
  of output this stack never returns (prompt logprobs' layout);
* **not supported**: fields whose meaning this stack cannot honour (logprobs, images,
  LoRA adapters, constrained decoding): accepted at their default only.

``docs/http-api.md`` lists them all in one table, which a test keeps equal to these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    AliasChoices,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from switchboard.worker.body_base import (
    INT32_MAX,
    Body,
    Count,
    NotSupported,
    Penalty,
    PromptInput,
    Rid,
    Seed,
    TokenIds,
)
from switchboard.worker.logprobs import MAX_TOP_LOGPROBS

__all__ = [
    "CompletionBody",
    "EmbeddingBody",
    "EncodeBody",
    "GenerateBody",
    "NativeSamplingParams",
    "ResponseFormat",
    "StreamOptions",
]

#: SGLang's per-prompt forms: one value for every prompt, or one per prompt.
OneOrEach = str | list[str | None]
#: SGLang's multimodal inputs (a URL, a file name, base64, or lists of them).
Media = str | list[Any] | dict[str, Any]
#: Accepted and ignored, with why.
Ignored = Field(description="accepted and ignored")
#: Token id strings to a bias, for an engine that applies them (switchboard/worker/logit_bias.py).
LogitBias = (
    "honoured: with an engine that applies it (the llama.cpp engine); token ids of the "
    "vocabulary, biases from -100 to 100"
)


class NativeSamplingParams(Body):
    """SGLang's ``sampling_params``; ``sampling_seed`` is SGLang's newer name of ``seed``."""

    location = "sampling_params"

    #: 0, as SGLang allows: answered at once with no tokens (the engine is not asked).
    max_new_tokens: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
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
    #: Samples per prompt: each is its own request to the engine.
    n: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    stream_interval: Annotated[
        int, Field(ge=1, description="accepted and ignored: every output is streamed")
    ] = 1
    logit_bias: Annotated[dict[str, float] | None, Field(description=LogitBias)] = None
    stop_regex: Annotated[str | list[str] | None, NotSupported("stop regexes")] = None
    json_schema: Annotated[str | None, NotSupported("constrained decoding")] = None
    regex: Annotated[str | None, NotSupported("constrained decoding")] = None
    ebnf: Annotated[str | None, NotSupported("constrained decoding")] = None
    structural_tag: Annotated[str | None, NotSupported("constrained decoding")] = None
    custom_params: Annotated[dict[str, Any] | None, NotSupported("custom logit processors")] = None
    beam_width: Annotated[int | None, NotSupported("beam search")] = None


class _NativeBody(Body):
    """What ``/generate`` and ``/encode`` share: one prompt kind, media, LoRA, hints."""

    text: str | list[str] | None = None
    input_ids: TokenIds | list[TokenIds] | None = None
    rid: Rid | list[Rid] | None = None
    image_data: Annotated[Media | None, NotSupported("images; this stack serves text")] = None
    video_data: Annotated[Media | None, NotSupported("video; this stack serves text")] = None
    audio_data: Annotated[Media | None, NotSupported("audio; this stack serves text")] = None
    modalities: Annotated[list[str] | None, NotSupported("modalities other than text")] = None
    lora_path: Annotated[OneOrEach | None, NotSupported("LoRA adapters")] = None
    lora_id: Annotated[OneOrEach | None, NotSupported("LoRA adapters")] = None
    log_metrics: Annotated[bool, Field(description="accepted and ignored")] = True
    priority: Annotated[int | None, Field(description="accepted and ignored")] = None
    #: SGLang's gateway names the model; one model is served, whatever it says.
    model: Annotated[str | None, Field(description="accepted and ignored")] = None

    @model_validator(mode="after")
    def _one_prompt_kind(self) -> Self:
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of text and input_ids")
        return self


#: A routing hint of SGLang's gateways; the Switchboard router picks the engine itself.
RoutingHint = Annotated[
    int | None, Field(description="accepted and ignored: the router places every request")
]
#: A detail of prompt logprobs, which are not returned.
LogprobDetail = Field(description="accepted and ignored: prompt logprobs are not returned")
#: With an engine that lists the logprobs feature (the llama.cpp engine); else a 400.
WithLogprobs = "honoured: with an engine that produces logprobs (the llama.cpp engine)"
#: A field of multimodal input, meaningless without the media (which are refused).
MediaDetail = Field(description="accepted and ignored: this stack serves text")
Disaggregation = NotSupported("prefill-decode disaggregation")


def _one_or_each(value: Any) -> str:
    return "each" if isinstance(value, list) else "one"


#: One ``sampling_params`` for every prompt, or one per prompt: told apart by the input's
#: shape, so an error names the object's field and not a branch of a union.
SamplingParamsInput = Annotated[
    Annotated[NativeSamplingParams, Tag("one")]
    | Annotated[list[NativeSamplingParams], Tag("each")],
    Discriminator(_one_or_each),
]


class GenerateBody(_NativeBody):
    """SGLang's ``POST /generate``: exactly one of ``text`` and ``input_ids``."""

    sampling_params: SamplingParamsInput = Field(default_factory=NativeSamplingParams)
    stream: bool = False
    return_logprob: Annotated[bool | list[bool], Field(description=WithLogprobs)] = False
    logprob_start_len: Annotated[
        int | list[int] | None,
        Field(description="honoured: only -1, output logprobs; prompt logprobs are refused"),
    ] = None
    top_logprobs_num: Annotated[
        Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)]
        | list[Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)]]
        | None,
        Field(description="honoured: alternatives per token, at most 20"),
    ] = None
    token_ids_logprob: Annotated[
        TokenIds | list[TokenIds] | None, NotSupported("logprobs of given token ids")
    ] = None
    return_text_in_logprobs: Annotated[bool, Field(description="honoured")] = False
    return_sampling_mask: Annotated[bool | list[bool] | None, NotSupported("sampling masks")] = None
    return_flat_raw_top_logprobs: Annotated[bool, LogprobDetail] = False
    return_flat_raw_top_logprobs_b64: Annotated[bool, LogprobDetail] = False
    input_embeds: Annotated[list[Any] | None, NotSupported("input embeddings")] = None
    return_hidden_states: Annotated[
        bool | str | list[bool | str], NotSupported("hidden states")
    ] = False
    return_routed_experts: Annotated[bool, NotSupported("routed experts")] = False
    routed_experts_start_len: Annotated[int, Field(description="accepted and ignored")] = 0
    return_indexer_topk: Annotated[bool, NotSupported("indexer top-k")] = False
    return_entropy: Annotated[bool, NotSupported("entropy")] = False
    return_prompt_token_ids: Annotated[bool, NotSupported("prompt token ids in the answer")] = False
    return_bytes: Annotated[bool, NotSupported("image generation")] = False
    session_params: Annotated[dict[str, Any] | None, NotSupported("sessions")] = None
    session_id: Annotated[
        str | None, Field(description="accepted and ignored: it does not change the prompt")
    ] = None
    custom_logit_processor: Annotated[OneOrEach | None, NotSupported("custom logit processors")] = (
        None
    )
    positional_embed_overrides: Annotated[Any, NotSupported("embedding overrides")] = None
    multi_item_delimiter_indices: Annotated[
        list[int] | list[list[int]] | None, NotSupported("multi-item scoring")
    ] = None
    require_reasoning: Annotated[bool, NotSupported("reasoning control")] = False
    max_thinking_tokens: Annotated[int | None, NotSupported("thinking budgets")] = None
    background: Annotated[bool, NotSupported("background responses")] = False
    bootstrap_host: Annotated[OneOrEach | None, Disaggregation] = None
    bootstrap_port: Annotated[int | list[int | None] | None, Disaggregation] = None
    bootstrap_room: Annotated[int | list[int | None] | None, Disaggregation] = None
    bootstrap_pair_key: Annotated[OneOrEach | None, Disaggregation] = None
    decode_tp_size: Annotated[int | list[int | None] | None, Disaggregation] = None
    data_parallel_rank: RoutingHint = None
    routed_dp_rank: RoutingHint = None
    disagg_prefill_dp_rank: RoutingHint = None
    kv_router_hint: Annotated[dict[str, Any] | None, Ignored] = None
    routing_key: Annotated[str | None, Ignored] = None
    conversation_id: Annotated[str | None, Ignored] = None
    custom_labels: Annotated[dict[str, str] | None, Ignored] = None
    external_trace_header: Annotated[
        dict[str, Any] | None,
        Field(description="accepted and ignored: the traceparent header carries the trace"),
    ] = None
    received_time: Annotated[float | None, Ignored] = None
    http_worker_ipc: Annotated[
        str | None, Field(description="accepted and ignored: the worker owns its requests")
    ] = None
    no_logs: Annotated[bool, Field(description="honoured: request contents are never logged")] = (
        False
    )
    extra_key: Annotated[
        str | list[str] | None,
        Field(description="accepted and ignored: requests share no prefix cache"),
    ] = None
    cache_salt: Annotated[
        str | list[str] | None,
        Field(description="accepted and ignored: requests share no prefix cache"),
    ] = None
    mm_hashes: Annotated[list[Any] | None, MediaDetail] = None
    mm_content_hashes: Annotated[list[Any] | None, MediaDetail] = None
    use_audio_in_video: Annotated[bool, MediaDetail] = False
    video_config: Annotated[dict[str, Any] | None, MediaDetail] = None
    max_dynamic_patch: Annotated[int | None, MediaDetail] = None
    min_dynamic_patch: Annotated[int | None, MediaDetail] = None
    image_max_dynamic_patch: Annotated[int | None, MediaDetail] = None
    video_max_dynamic_patch: Annotated[int | None, MediaDetail] = None
    images_config: Annotated[dict[str, Any] | None, MediaDetail] = None
    need_wait_for_mm_inputs: Annotated[bool | None, MediaDetail] = None
    num_items_assigned: Annotated[dict[str, Any] | None, MediaDetail] = None
    encoder_urls: Annotated[list[str] | None, MediaDetail] = None


class EncodeBody(_NativeBody):
    """SGLang's ``POST /encode``: embed ``text`` or ``input_ids`` (one or a batch)."""

    sampling_params: Annotated[
        dict[str, Any] | list[dict[str, Any]] | None,
        Field(description="accepted and ignored, as SGLang does: embedding samples nothing"),
    ] = None
    dimensions: Annotated[int | None, NotSupported("dimensions: the engine has one size")] = None


class StreamOptions(Body):
    """OpenAI ``stream_options``."""

    location = "stream_options"

    include_usage: bool = False
    include_obfuscation: Annotated[
        bool, Field(description="accepted and ignored: chunks carry no obfuscation padding")
    ] = False
    continuous_usage_stats: Annotated[bool, NotSupported("usage in every chunk")] = False


class ResponseFormat(Body):
    """OpenAI's ``response_format``: only ``text`` (the default) is served; ``json_object``
    and ``json_schema`` need constrained decoding."""

    location = "response_format"

    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: Annotated[
        dict[str, Any] | None,
        Field(description="accepted and ignored: type json_schema, which it goes with, is refused"),
    ] = None

    @field_validator("type")
    @classmethod
    def _text_only(cls, kind: str) -> str:
        if kind != "text":
            raise PydanticCustomError(
                "not_supported",
                "not supported by this server: {kind} (constrained decoding); only text",
                {"kind": kind},
            )
        return kind


class CompletionBody(Body):
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
    best_of: (
        Annotated[int, Field(ge=1, le=INT32_MAX, description="honoured: only equal to n")] | None
    ) = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    echo: bool = False
    logprobs: Annotated[
        int | None,
        Field(ge=0, le=MAX_TOP_LOGPROBS, description=WithLogprobs + "; alternatives per token"),
    ] = None
    seed: Seed | None = None
    user: Annotated[str | None, Field(description="accepted and ignored")] = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    frequency_penalty: Penalty = 0.0
    presence_penalty: Penalty = 0.0
    logit_bias: Annotated[dict[str, float] | None, Field(description=LogitBias)] = None
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
    response_format: ResponseFormat | None = None
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


class EmbeddingBody(Body):
    """OpenAI ``POST /v1/embeddings``."""

    model: str
    input: PromptInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int | None, NotSupported("dimensions: the engine has one size")] = None
    user: str | None = None
