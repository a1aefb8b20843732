"""What the built-in engine generates: :class:`Predictor` computes every generated text
and embedding from the engine's rules (:mod:`switchboard.engine.tokens`) and the default
tokenizer, the same way the engine and the detokenizers derive them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from switchboard.engine import embedding_for, generated_token, text_token_pool
from switchboard.text import Tokenizer

__all__ = ["EMBEDDING_DIMENSION", "Predictor"]

#: The engine's embedding dimension (``SchedulerConfig.embedding_dimension``; no CLI flag).
EMBEDDING_DIMENSION = 64


@dataclass
class Predictor:
    """What the built-in engine (``--vocab-seed`` ``seed``) generates for each prompt."""

    tokenizer: Tokenizer
    seed: int = 0

    @cached_property
    def pool(self) -> tuple[int, ...]:
        """The ids the engine draws from (it builds the same pool from the same tokenizer)."""
        tok = self.tokenizer
        return text_token_pool(tok.vocab_size, tok.decode, tok.special_token_ids)

    def prompt_ids(self, prompt: str | Sequence[int]) -> list[int]:
        """The ids a worker sends for ``prompt`` (user text: special tokens not parsed)."""
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt, parse_special=False)
        return list(prompt)

    def token_ids(self, prompt: str | Sequence[int], count: int) -> list[int]:
        """The first ``count`` generated ids, by the token rule."""
        ids = self.prompt_ids(prompt)
        return [generated_token(self.pool, ids, i, self.seed) for i in range(count)]

    def text(self, prompt: str | Sequence[int], count: int) -> str:
        """The whole text of a ``count``-token generation."""
        return self.tokenizer.decode(self.token_ids(prompt, count))

    def embedding(self, prompt: str | Sequence[int]) -> list[float]:
        """The embedding of ``prompt``, by the embedding rule."""
        return embedding_for(self.prompt_ids(prompt), EMBEDDING_DIMENSION, self.seed)

    def distinct_prompts(self, count: int, lengths: Sequence[int], stem: str) -> list[str]:
        """``count`` prompts whose texts (prompt ``i`` generating ``lengths[i]`` tokens)
        all differ, so a response delivered to the wrong client cannot go unnoticed."""
        prompts: list[str] = []
        seen: set[str] = set()
        candidate = 0
        while len(prompts) < count:
            prompt = f"{stem} {candidate}: tell me about request {candidate * 7}"
            candidate += 1
            text = self.text(prompt, lengths[len(prompts)])
            if text not in seen:
                seen.add(text)
                prompts.append(prompt)
        return prompts
