"""The worker's request bodies (``switchboard.worker.schemas``): unknown fields ignored
and recorded (refused under the reject policy), every field a standard client sends
named, fields this stack cannot honour refused only when given a value other than their
default, ``null`` as good as absent.

The OpenAI bodies are checked against what the installed ``openai`` SDK declares and
actually sends (captured by an httpx mock transport, so no server is involved)."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from openai.types import completion_create_params, embedding_create_params
from openai.types.chat import chat_completion_stream_options_param
from pydantic import BaseModel, ValidationError

from switchboard.worker.body_base import accepted_names, unknown_fields_policy
from switchboard.worker.schemas import (
    CompletionBody,
    EmbeddingBody,
    EncodeBody,
    GenerateBody,
    NativeSamplingParams,
    StreamOptions,
)

#: Every field of SGLang's ``GenerateReqInput`` (python/sglang/srt/managers/io_struct.py,
#: sgl-project/sglang at 001067ff, December 2026), plus ``model``, which SGLang's gateway
#: (sglang-router) adds.
SGLANG_GENERATE_FIELDS = [
    "rid",
    "session_id",
    "text",
    "input_ids",
    "input_embeds",
    "image_data",
    "video_data",
    "audio_data",
    "mm_hashes",
    "mm_content_hashes",
    "use_audio_in_video",
    "video_config",
    "sampling_params",
    "return_logprob",
    "logprob_start_len",
    "top_logprobs_num",
    "token_ids_logprob",
    "return_sampling_mask",
    "return_text_in_logprobs",
    "return_flat_raw_top_logprobs",
    "return_flat_raw_top_logprobs_b64",
    "stream",
    "log_metrics",
    "return_hidden_states",
    "return_routed_experts",
    "routed_experts_start_len",
    "return_indexer_topk",
    "modalities",
    "session_params",
    "lora_path",
    "lora_id",
    "custom_logit_processor",
    "positional_embed_overrides",
    "bootstrap_host",
    "bootstrap_port",
    "bootstrap_room",
    "bootstrap_pair_key",
    "decode_tp_size",
    "routed_dp_rank",
    "data_parallel_rank",
    "disagg_prefill_dp_rank",
    "kv_router_hint",
    "routing_key",
    "conversation_id",
    "http_worker_ipc",
    "background",
    "require_reasoning",
    "max_thinking_tokens",
    "priority",
    "extra_key",
    "no_logs",
    "custom_labels",
    "return_bytes",
    "return_entropy",
    "return_prompt_token_ids",
    "external_trace_header",
    "received_time",
    "need_wait_for_mm_inputs",
    "num_items_assigned",
    "encoder_urls",
    "max_dynamic_patch",
    "min_dynamic_patch",
    "image_max_dynamic_patch",
    "video_max_dynamic_patch",
    "images_config",
    "multi_item_delimiter_indices",
    "cache_salt",
    "model",
]
#: SGLang's ``SamplingParams`` API fields (``sampling_seed`` is the alias of ``seed``).
SGLANG_SAMPLING_FIELDS = [
    "max_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_new_tokens",
    "n",
    "json_schema",
    "regex",
    "ebnf",
    "structural_tag",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "custom_params",
    "stream_interval",
    "logit_bias",
    "sampling_seed",
    "beam_width",
]


def refusal(model: type[BaseModel], body: Any) -> list[tuple[str, str]]:
    """Where and why ``body`` is refused: (dotted location, message) per problem."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in caught.value.errors()]


def sdk_fields(params: type) -> set[str]:
    """The keys a TypedDict of the openai SDK declares."""
    return set(typing.get_type_hints(params))


class CapturedBodies:
    """An openai client whose request bodies are captured, each answered ``{}`` (the
    calls take the raw response, which the SDK does not parse)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        transport = httpx.MockTransport(self._handle)
        self.client = OpenAI(
            base_url="http://sdk.invalid/v1",
            api_key="unused",
            # The SDK takes an httpx client as well as its own httpx2 one; its types
            # name only httpx2.
            http_client=httpx.Client(transport=transport),  # type: ignore[arg-type]
            max_retries=0,
        )

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json={})


@pytest.fixture
def sdk() -> Iterator[CapturedBodies]:
    """An openai client whose request bodies are captured."""
    captured = CapturedBodies()
    yield captured
    captured.client.close()


UNKNOWN = [
    (GenerateBody, {"text": "a", "no_such_field": 1}, "no_such_field"),
    (GenerateBody, {"text": "a", "no_such_field": None}, "no_such_field"),
    (EncodeBody, {"text": "a", "no_such_field": 1}, "no_such_field"),
    (CompletionBody, {"model": "m", "prompt": "a", "no_such_field": 1}, "no_such_field"),
    (EmbeddingBody, {"model": "m", "input": "a", "no_such_field": 1}, "no_such_field"),
    (NativeSamplingParams, {"max_new_token": 1}, "max_new_token"),
    (StreamOptions, {"include_usge": True}, "include_usge"),
]


class TestUnknownFields:
    """A field no model names is ignored and recorded, at any depth, even when null;
    under the reject policy it is refused."""

    @pytest.mark.parametrize(("model", "body", "where"), UNKNOWN)
    def test_refused_naming_the_field_when_rejecting(
        self, model: type[BaseModel], body: dict[str, Any], where: str
    ) -> None:
        """The one problem is at the unknown field, "Extra inputs are not permitted"."""
        with unknown_fields_policy(reject=True) as policy:
            assert refusal(model, body) == [(where, "Extra inputs are not permitted")]
        assert policy.ignored == []

    @pytest.mark.parametrize(("model", "body", "where"), UNKNOWN)
    def test_ignored_and_recorded_by_default(
        self, model: type[BaseModel], body: dict[str, Any], where: str
    ) -> None:
        """The body validates as if the field were not there, and the field is recorded
        (dotted where it is nested)."""
        with unknown_fields_policy() as policy:
            validated = model.model_validate(body)
        known = {key: value for key, value in body.items() if key != where}
        assert validated == model.model_validate(known)
        assert policy.ignored == [f"{model.location}.{where}" if model.location else where]

    def test_nested_fields_are_named_where_they_are(self) -> None:
        """One body's ignored fields, top level and in ``sampling_params`` (one or each)."""
        body = {
            "text": ["a", "b"],
            "model": "served",
            "nope": 1,
            "sampling_params": [{"max_new_tokens": 2, "x": 1}, {"y": None}],
        }
        with unknown_fields_policy() as policy:
            GenerateBody.model_validate(body)
        assert sorted(policy.ignored) == ["nope", "sampling_params.x", "sampling_params.y"]

    def test_outside_a_request_nothing_is_recorded(self) -> None:
        """Without a policy (no request), unknown fields are ignored and recorded nowhere."""
        assert GenerateBody.model_validate({"text": "a", "zzz": 1}) == GenerateBody(text="a")


class TestOpenAIClients:
    """Every field the openai SDK can send is named, and what it sends is accepted."""

    def test_every_completion_field_of_the_sdk_is_named(self) -> None:
        """CompletionBody names each key of the SDK's completion params (stream too)."""
        declared = sdk_fields(completion_create_params.CompletionCreateParamsStreaming)
        assert declared - set(CompletionBody.model_fields) == set()

    def test_every_embedding_and_stream_option_field_is_named(self) -> None:
        """EmbeddingBody and StreamOptions name each key the SDK declares."""
        assert sdk_fields(embedding_create_params.EmbeddingCreateParams) <= set(
            EmbeddingBody.model_fields
        )
        options = chat_completion_stream_options_param.ChatCompletionStreamOptionsParam
        assert sdk_fields(options) <= set(StreamOptions.model_fields)

    def test_a_completion_with_every_parameter_is_accepted(self, sdk: CapturedBodies) -> None:
        """The body the SDK sends for a call giving every parameter (at values this
        stack honours) validates, each value kept."""
        sdk.client.completions.with_raw_response.create(
            model="m",
            prompt=["a", "b"],
            best_of=2,
            echo=True,
            frequency_penalty=0.5,
            logprobs=0,
            max_tokens=4,
            n=2,
            presence_penalty=-0.5,
            seed=3,
            stop=["x"],
            stream_options={"include_usage": True, "include_obfuscation": True},
            suffix=None,
            temperature=0.7,
            top_p=0.9,
            user="u",
            extra_body={"top_k": 20, "repetition_penalty": 1.05, "min_p": 0.1},
        )
        [sent] = sdk.bodies
        body = CompletionBody.model_validate(sent)
        assert (body.n, body.best_of, body.max_tokens, body.echo) == (2, 2, 4, True)
        assert body.stream_options == StreamOptions(include_usage=True, include_obfuscation=True)
        assert (body.top_k, body.repetition_penalty) == (20, 1.05)

    def test_every_optional_parameter_as_null_is_the_default(self, sdk: CapturedBodies) -> None:
        """Passing None for every nullable parameter sends nulls; they mean the defaults."""
        sdk.client.completions.with_raw_response.create(
            model="m",
            prompt="a",
            best_of=None,
            echo=None,
            frequency_penalty=None,
            logit_bias=None,
            logprobs=None,
            max_tokens=None,
            n=None,
            presence_penalty=None,
            seed=None,
            stop=None,
            stream=None,
            stream_options=None,
            suffix=None,
            temperature=None,
            top_p=None,
        )
        [sent] = sdk.bodies
        assert sent["n"] is None and sent["stream"] is None
        assert CompletionBody.model_validate(sent) == CompletionBody(model="m", prompt="a")

    def test_embeddings_as_the_sdk_sends_them(self, sdk: CapturedBodies) -> None:
        """The SDK's embedding body (base64 unless told otherwise) validates."""
        sdk.client.embeddings.with_raw_response.create(model="m", input=["a", "b"], user="u")
        sdk.client.embeddings.with_raw_response.create(
            model="m", input=[1, 2], encoding_format="float"
        )
        formats = [EmbeddingBody.model_validate(sent).encoding_format for sent in sdk.bodies]
        assert formats == ["base64", "float"]


class TestSGLangClients:
    """SGLang's /generate and sampling fields are named."""

    def test_generate_fields_are_named(self) -> None:
        """Each commonly sent GenerateReqInput field is a GenerateBody field."""
        assert set(SGLANG_GENERATE_FIELDS) - accepted_names(GenerateBody) == set()

    def test_sampling_fields_are_named(self) -> None:
        """Each SamplingParams API field is a NativeSamplingParams field."""
        assert set(SGLANG_SAMPLING_FIELDS) - accepted_names(NativeSamplingParams) == set()

    def test_sampling_seed_is_seed(self) -> None:
        """``sampling_seed`` (SGLang's newer name) sets ``seed``."""
        assert NativeSamplingParams.model_validate({"sampling_seed": 9}).seed == 9
        assert NativeSamplingParams.model_validate({"seed": 9}).seed == 9

    def test_ignored_fields_are_accepted(self) -> None:
        """Logprob details, hints and sampling knobs this stack ignores validate."""
        body = GenerateBody.model_validate(
            {
                "text": "a",
                "sampling_params": {"min_p": 0.1, "repetition_penalty": 1.1, "logit_bias": {}},
                "logprob_start_len": -1,
                "top_logprobs_num": 5,
                "return_text_in_logprobs": True,
                "log_metrics": False,
                "priority": 3,
                "data_parallel_rank": 0,
            }
        )
        assert body.top_logprobs_num == 5 and body.priority == 3

    def test_nulls_are_defaults(self) -> None:
        """null sampling params, stream and sampling knobs are their defaults."""
        body = GenerateBody.model_validate(
            {"text": "a", "stream": None, "sampling_params": {"temperature": None, "n": None}}
        )
        assert body == GenerateBody(text="a")


class TestNotSupported:
    """A field this stack cannot honour: its default passes, another value is a 400."""

    @pytest.mark.parametrize(
        ("model", "body", "where", "what"),
        [
            (GenerateBody, {"text": "a", "token_ids_logprob": [1]}, "token_ids_logprob", "ids"),
            (GenerateBody, {"text": "a", "image_data": "x.png"}, "image_data", "images"),
            (GenerateBody, {"text": "a", "lora_path": ["x", None]}, "lora_path", "LoRA"),
            (GenerateBody, {"text": "a", "bootstrap_room": 7}, "bootstrap_room", "prefill"),
            (NativeSamplingParams, {"beam_width": 4}, "beam_width", "beam search"),
            (GenerateBody, {"text": "a", "return_entropy": True}, "return_entropy", "entropy"),
            (GenerateBody, {"text": "a", "background": True}, "background", "background"),
            (NativeSamplingParams, {"regex": "a+"}, "regex", "constrained decoding"),
            (CompletionBody, {"model": "m", "prompt": "a", "suffix": "z"}, "suffix", "suffix"),
            (CompletionBody, {"model": "m", "prompt": "a", "best_of": 3}, "best_of", "best_of"),
            (EmbeddingBody, {"model": "m", "input": "a", "dimensions": 8}, "dimensions", "size"),
            (EncodeBody, {"text": "a", "dimensions": 8}, "dimensions", "size"),
            (StreamOptions, {"continuous_usage_stats": True}, "continuous_usage_stats", "usage"),
        ],
    )
    def test_a_value_is_refused_saying_so(
        self, model: type[BaseModel], body: dict[str, Any], where: str, what: str
    ) -> None:
        """The one problem is at the field: "not supported by this server: <what>"."""
        [(location, message)] = refusal(model, body)
        assert location == where
        assert message.startswith("not supported by this server: ") and what in message

    @pytest.mark.parametrize(
        ("model", "body"),
        [
            (
                GenerateBody,
                {
                    "text": ["a", "b"],
                    "return_logprob": [False, False],
                    "lora_path": [None, None],
                    "image_data": [],
                    "return_hidden_states": False,
                    "sampling_params": [{"n": 1}, {"regex": None}],
                },
            ),
            (CompletionBody, {"model": "m", "prompt": "a", "logprobs": 0, "suffix": ""}),
            (CompletionBody, {"model": "m", "prompt": "a", "n": 3, "best_of": 3}),
            (EmbeddingBody, {"model": "m", "input": "a", "dimensions": None}),
        ],
    )
    def test_the_default_is_accepted(self, model: type[BaseModel], body: dict[str, Any]) -> None:
        """The default, null, an empty value, or a list of defaults (one per prompt) pass."""
        model.model_validate(body)

    def test_the_schema_says_so(self) -> None:
        """The OpenAPI description of such a field says it is not supported, and of an
        ignored one that it is ignored."""
        properties = GenerateBody.model_json_schema()["properties"]
        assert properties["lora_path"]["description"] == (
            "not supported (LoRA adapters): only the default is accepted"
        )
        assert (
            "ignored" in CompletionBody.model_json_schema()["properties"]["priority"]["description"]
        )
