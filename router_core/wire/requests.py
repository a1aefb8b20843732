"""Request payloads that workers send towards the engine."""

from __future__ import annotations

import msgspec

__all__ = ["AbortRequest", "EmbeddingRequest", "GenerateRequest", "SamplingParams"]


class SamplingParams(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=False):
    """How to sample; the names and meanings follow SGLang's ``sampling_params``."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    #: Penalties over the generated tokens: OpenAI's additive frequency and presence
    #: penalties, and the multiplicative repetition penalty (1.0: none).
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0
    stop: list[str] = []
    stop_token_ids: list[int] = []
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: int | None = None
    #: Token id -> a bias added to its logit before sampling (OpenAI's and SGLang's
    #: ``logit_bias``: -100 bans the token, 100 all but forces it). Only an engine that
    #: lists the ``logit_bias`` feature receives a non-empty one.
    logit_bias: dict[int, float] = {}


class GenerateRequest(msgspec.Struct, omit_defaults=True):
    """One generation request (SGLang's tokenized ``GenerateReqInput``).

    ``input_ids`` is the tokenized prompt; ``text`` is kept for logging and for engines
    that tokenize themselves.
    """

    rid: str
    input_ids: list[int]
    sampling_params: SamplingParams = msgspec.field(default_factory=SamplingParams)
    text: str | None = None
    stream: bool = False
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    priority: int | None = None
    created_ns: int = 0


class EmbeddingRequest(msgspec.Struct, omit_defaults=True):
    """One embedding request (SGLang's tokenized ``EmbeddingReqInput``)."""

    rid: str
    input_ids: list[int]
    text: str | None = None
    created_ns: int = 0


class AbortRequest(msgspec.Struct, omit_defaults=True):
    """Abort one request, or every request of the sending worker with ``abort_all``."""

    rid: str = ""
    abort_all: bool = False
    reason: str = "client"
