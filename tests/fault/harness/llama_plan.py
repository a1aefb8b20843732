"""The requests a fault test sends to the llama.cpp engine, each with llama.cpp's own text.

The built-in engine's texts follow from a rule (``harness/expected.py``); a real model's
do not, so each text here is what llama-cpp-python's own ``Llama`` generates greedily
for the prompt alone (:class:`tests.support.llama_models.GreedyReference`) on the tiny
generated model, as llama.cpp's server would stream it (each id's piece, a leading space
kept: :func:`tests.support.llama_vocab.llama_pieces`). The requests ask for greedy
sampling and ``ignore_eos``, so every one runs to its ``max_tokens``; the tiny model's
greedy margins stand far above float rounding (``docs/engine.md``, section 9), so its
tokens are the same alone or batched, before and after a pause, a retract or an engine
restart. A request given another's output, or tokens lost or doubled, changes its text.
"""

from __future__ import annotations

import functools
from pathlib import Path

from switchboard.text import GgufTokenizer, load_tokenizer
from tests.fault.harness.expected import COMPLETIONS_EVERY, Endpoint, RequestPlan, RequestSpec
from tests.support.llama_models import GreedyReference, tiny_model
from tests.support.llama_vocab import llama_pieces

__all__ = ["GREEDY", "llama_plan", "model_path"]

#: What every request of a llama plan asks for besides its length.
GREEDY: tuple[tuple[str, object], ...] = (("temperature", 0.0), ("ignore_eos", True))


def model_path() -> Path:
    """The tiny generated model the llama fault tests serve."""
    return tiny_model()


@functools.cache
def llama_plan(
    label: str, size: int = 48, min_tokens: int = 16, max_tokens: int = 64
) -> RequestPlan:
    """``size`` prompts named after ``label``, lengths cycling through
    ``min_tokens..max_tokens``, every fourth through ``/v1/completions``."""
    model = model_path()
    reference = GreedyReference(model)
    tokenizer = load_tokenizer(model)
    assert isinstance(tokenizer, GgufTokenizer)
    span = max_tokens - min_tokens + 1
    specs: list[RequestSpec] = []
    try:
        for index in range(size):
            prompt = f"{label} request {index}: tell me about item {index * 7}"
            tokens = min_tokens + (index * 37) % span
            ids = reference.tokens(reference.text_tokens(prompt), tokens)
            openai = index % COMPLETIONS_EVERY == COMPLETIONS_EVERY - 1
            endpoint: Endpoint = "completions" if openai else "generate"
            text = llama_pieces(tokenizer, ids)
            specs.append(RequestSpec(index, endpoint, prompt, tokens, text, GREEDY))
    finally:
        reference.close()
    return RequestPlan(tuple(specs))
