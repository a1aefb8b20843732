"""The requests a fault test sends, each with the text the built-in engine must give it.

The built-in engine is deterministic (``switchboard/engine/tokens.py``): token ``i`` of a
request depends only on the sum of its prompt ids and ``i``, never on timing, batching,
pauses or restarts. So every text is computed before the run (:class:`Predictor`, the
engine's own rule over the same default tokenizer) instead of taken from a fault-free
run, and a plan's prompts are chosen with pairwise different id sums (modulo the pool),
so a row delivered to the wrong request changes its text and cannot go unnoticed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from switchboard.text import load_tokenizer
from tests.integration.harness.predictor import Predictor

__all__ = ["Endpoint", "RequestPlan", "RequestSpec", "predictor"]

#: ``generate``: SGLang's native ``POST /generate``; ``completions``: ``POST /v1/completions``.
Endpoint = Literal["generate", "completions"]

#: Every fourth request goes through the OpenAI face.
COMPLETIONS_EVERY = 4


@functools.cache
def predictor() -> Predictor:
    """The predictor over the default tokenizer (loaded once per test process)."""
    return Predictor(load_tokenizer())


@dataclass(frozen=True)
class RequestSpec:
    """One request of a plan and the whole text it must end with."""

    index: int
    endpoint: Endpoint
    prompt: str
    max_tokens: int
    text: str
    #: Further sampling fields (a real engine's plan: greedy, ``ignore_eos``), in
    #: ``sampling_params`` of ``/generate`` and at the top of ``/v1/completions``.
    sampling: tuple[tuple[str, object], ...] = ()

    def body(self, rid: str, model: str) -> dict[str, object]:
        """The JSON body of a streaming request (``rid`` only where the API takes one)."""
        if self.endpoint == "generate":
            return {
                "text": self.prompt,
                "rid": rid,
                "stream": True,
                "sampling_params": {"max_new_tokens": self.max_tokens, **dict(self.sampling)},
            }
        return {
            "model": model,
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "stream": True,
            **dict(self.sampling),
        }


@dataclass(frozen=True)
class RequestPlan:
    """``size`` distinct requests, reused in turn (request ``n`` is ``specs[n % size]``)."""

    specs: tuple[RequestSpec, ...]

    @classmethod
    def build(
        cls, label: str, size: int = 400, min_tokens: int = 16, max_tokens: int = 96
    ) -> RequestPlan:
        """Prompts named after ``label`` whose lengths cycle through
        ``min_tokens..max_tokens``; no two share an id sum modulo the engine's pool."""
        rule = predictor()
        if size > len(rule.pool):
            raise ValueError(f"at most {len(rule.pool)} distinct requests, asked {size}")
        span = max_tokens - min_tokens + 1
        specs: list[RequestSpec] = []
        sums: set[int] = set()
        candidate = 0
        while len(specs) < size:
            prompt = f"{label} request {candidate}: tell me about item {candidate * 7}"
            candidate += 1
            key = sum(rule.prompt_ids(prompt)) % len(rule.pool)
            if key in sums:
                continue
            sums.add(key)
            index = len(specs)
            tokens = min_tokens + (index * 37) % span
            openai = index % COMPLETIONS_EVERY == COMPLETIONS_EVERY - 1
            endpoint: Endpoint = "completions" if openai else "generate"
            specs.append(RequestSpec(index, endpoint, prompt, tokens, rule.text(prompt, tokens)))
        return cls(tuple(specs))

    def spec(self, number: int) -> RequestSpec:
        return self.specs[number % len(self.specs)]
