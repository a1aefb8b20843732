"""OpenAI's and SGLang's ``logit_bias``, checked against the vocabulary and the engine.

A client maps token ids, written as strings (JSON object keys), to a bias the engine adds
to that token's logit before sampling: -100 bans the token, 100 all but forces it. The
worker turns the map into :attr:`router_core.wire.requests.SamplingParams.logit_bias`
(ids as integers) only for an engine that lists the :data:`LOGIT_BIAS_FEATURE` in its
load snapshot (the llama.cpp engine); for any other a request with a bias is a 400, never
an answer sampled without it. Each key must be a token id of the served vocabulary and
each bias a finite number within ±:data:`MAX_BIAS`; at most :data:`MAX_ENTRIES` entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from router_core.wire.control import LoadSnapshot
from switchboard.worker.generation import PromptError

__all__ = ["LOGIT_BIAS_FEATURE", "MAX_BIAS", "MAX_ENTRIES", "logit_bias_of", "parse_logit_bias"]

#: The feature an engine lists when it applies ``logit_bias``.
LOGIT_BIAS_FEATURE: Final = "logit_bias"
#: OpenAI's bound on a bias.
MAX_BIAS: Final = 100.0
#: The most tokens one request may bias (OpenAI documents no bound; this keeps a sampler
#: built per request small).
MAX_ENTRIES: Final = 1024


def parse_logit_bias(given: Mapping[str, float], vocab_size: int, param: str) -> dict[int, float]:
    """``given`` with its keys as token ids; ``PromptError`` naming ``param`` (and the
    key) for a key that is not an id below ``vocab_size``, a bias that is not a finite
    number within ±:data:`MAX_BIAS`, or more than :data:`MAX_ENTRIES` entries."""
    if len(given) > MAX_ENTRIES:
        raise PromptError(
            f"{param}: {len(given)} entries; at most {MAX_ENTRIES} tokens may be biased", param
        )
    parsed: dict[int, float] = {}
    for key, bias in given.items():
        where = f"{param}.{key}"
        text = key.strip()
        if not text.isdigit() or not text.isascii():
            raise PromptError(f"{where}: a key must be a token id (a whole number)", param)
        token = int(text)
        if token >= vocab_size:
            raise PromptError(
                f"{where}: token {token} is not in the vocabulary of {vocab_size} tokens", param
            )
        if not math.isfinite(bias) or abs(bias) > MAX_BIAS:
            raise PromptError(
                f"{where}: the bias must be from -{MAX_BIAS:g} to {MAX_BIAS:g}, not {bias!r}", param
            )
        parsed[token] = float(bias)
    return parsed


def logit_bias_of(
    given: Mapping[str, float] | None, load: LoadSnapshot | None, vocab_size: int, param: str
) -> dict[int, float]:
    """The wire ``logit_bias`` of a request's ``given`` one (None or empty: none), for an
    engine whose latest ``load`` snapshot lists the feature; otherwise ``PromptError``."""
    if not given:
        return {}
    if load is None or LOGIT_BIAS_FEATURE not in load.features:
        raise PromptError(
            f"{param}: this stack's engine does not apply logit_bias (it does not list the "
            "logit_bias feature; the llama.cpp engine does)",
            param,
        )
    return parse_logit_bias(given, vocab_size, param)
