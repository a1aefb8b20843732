"""Batched outputs, column-shaped as the engine produces them.

Field names and meanings follow SGLang's ``BatchTokenIDOutput``, ``BatchStrOutput`` and
``BatchEmbeddingOutput`` (``io_struct.py``), every field kept. Every field is a
per-request column: either a list with one entry per ``rids`` entry, or a dict whose
values are such lists; ``None`` means the whole column is absent from this batch. That
uniformity is what lets :mod:`router_core.wire.split` split any batch without per-field
code.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = [
    "WEIGHT_VERSION",
    "BatchEmbeddingOutput",
    "BatchOutput",
    "BatchStrOutput",
    "BatchTokenIDOutput",
]


#: The ``customized_info`` key of the weight version that made each row's tokens (absent:
#: the engine's own weights, never updated). Workers answer it as
#: ``meta_info.weight_version``, the version of a request's last row.
WEIGHT_VERSION: Final = "weight_version"


class _BatchColumns(msgspec.Struct, omit_defaults=True, kw_only=True):
    """Columns every batched output has."""

    #: Request ids, one per row.
    rids: list[str]
    #: Return address of the worker that owns each row (the seed's ``http_worker_ipcs``).
    http_worker_ipcs: list[str] | None = None
    #: Why each request finished (``{"type": "length" | "stop" | "abort", ...}``), or None
    #: while it is still running.
    finished_reasons: list[dict[str, Any] | None] | None = None
    #: Number of prompt tokens of each request.
    prompt_tokens: list[int] | None = None
    #: Prompt tokens served from the prefix cache.
    cached_tokens: list[int] | None = None
    #: Multimodal placeholder token positions and values, per request.
    placeholder_tokens_idx: list[list[int] | None] | None = None
    placeholder_tokens_val: list[list[int] | None] | None = None


class _GenerationColumns(_BatchColumns, kw_only=True):
    """Columns shared by token-id and string outputs of a decode step."""

    # Speculative decoding statistics.
    spec_verify_ct: list[int] | None = None
    spec_num_correct_drafts: list[int] | None = None
    spec_correct_drafts_histogram: list[list[int]] | None = None
    spec_num_block_accept_tokens: list[int] | None = None
    spec_num_cap_tokens: list[int] | None = None
    spec_cap_lens_histogram: list[list[int]] | None = None
    #: Per-request timestamps of scheduling stages (stage name -> seconds).
    time_stats: list[dict[str, float] | None] | None = None
    #: All output token ids so far (or only the new ones in incremental mode).
    output_ids: list[list[int]] | None = None
    completion_tokens: list[int] | None = None
    reasoning_tokens: list[int] | None = None
    #: Where cached prompt tokens came from (e.g. ``{"device": 10, "host": 4}``).
    cached_tokens_details: list[dict[str, int] | None] | None = None
    image_tokens: list[int] | None = None
    audio_tokens: list[int] | None = None
    video_tokens: list[int] | None = None
    # Logprobs: values and token indices, for the prompt and the output.
    input_token_logprobs_val: list[list[float]] | None = None
    input_token_logprobs_idx: list[list[int]] | None = None
    output_token_logprobs_val: list[list[float]] | None = None
    output_token_logprobs_idx: list[list[int]] | None = None
    input_top_logprobs_val: list[list[list[float]]] | None = None
    input_top_logprobs_idx: list[list[list[int]]] | None = None
    output_top_logprobs_val: list[list[list[float]]] | None = None
    output_top_logprobs_idx: list[list[list[int]]] | None = None
    input_token_ids_logprobs_val: list[list[list[float]]] | None = None
    input_token_ids_logprobs_idx: list[list[list[int]]] | None = None
    output_token_ids_logprobs_val: list[list[list[float]]] | None = None
    output_token_ids_logprobs_idx: list[list[list[int]]] | None = None
    output_token_entropy_val: list[list[float]] | None = None
    output_hidden_states: list[list[float]] | None = None
    #: MoE experts each token was routed to.
    routed_experts: list[list[int]] | None = None
    indexer_topk: list[list[int]] | None = None
    #: How many times each request was retracted to the waiting queue.
    retraction_counts: list[int] | None = None
    #: Decode step index of each output token.
    token_steps: list[list[int]] | None = None
    #: Engine-specific extras: key -> one value per request. Known key:
    #: :data:`WEIGHT_VERSION`, the version of the weights that made the row's tokens.
    customized_info: dict[str, list[Any]] | None = None
    #: Data-parallel rank that served each request.
    dp_ranks: list[int] | None = None


class BatchTokenIDOutput(_GenerationColumns, kw_only=True):
    """Engine -> detokenizer: new token ids of one decode step, per request."""

    #: Text decoded so far (the detokenizer's incremental state travels with the request).
    decoded_texts: list[str] | None = None
    #: Token ids to decode from ``read_offsets`` on.
    decode_ids: list[list[int]] | None = None
    read_offsets: list[int] | None = None
    skip_special_tokens: list[bool] | None = None
    spaces_between_special_tokens: list[bool] | None = None
    no_stop_trim: list[bool] | None = None
    #: Switchboard extension: characters the detokenizer holds back so that a stop string
    #: spanning steps can still be trimmed (the longest stop string's length minus one,
    #: 0 without stop strings). Absent: the detokenizer's own default.
    stop_holdback: list[int] | None = None


class BatchStrOutput(_GenerationColumns, kw_only=True):
    """Detokenizer -> worker: new text of one decode step, per request."""

    output_strs: list[str] | None = None


class BatchEmbeddingOutput(_BatchColumns, kw_only=True):
    """Engine -> worker: finished embeddings, per request."""

    embeddings: list[list[float]] | None = None


#: Any batched output.
BatchOutput = BatchTokenIDOutput | BatchStrOutput | BatchEmbeddingOutput
