"""The built-in engine's deterministic outputs: generated token ids and embeddings.

**Token rule.** The engine draws every generated token from a *pool*: the sorted ids
that are not special tokens and that decode, alone, to printable text without U+FFFD
(:func:`text_token_pool`), so that generated ids always detokenize to real text. Token
``i`` (0-based) of a request with prompt ids ``p`` is::

    pool[(sum(p) * 31 + i * 7919 + seed) % len(pool)]

where ``seed`` is the engine's ``--vocab-seed`` (default 0). It depends on the prompt
ids and the position alone: not on timing, batching, pauses or retractions, so a test
predicts every token from the prompt. The pool holds no special ids, so the rule never
yields EOS: a request ends by ``max_new_tokens``, a stop token id or a stop string.

**Embedding rule.** The embedding of prompt ids ``p`` is ``dimension`` Gaussian values
from ``random.Random`` seeded with the BLAKE2b digest of ``seed`` and ``p``, scaled to
unit length (:func:`embedding_for`).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "TOKEN_POSITION_STRIDE",
    "TOKEN_PROMPT_FACTOR",
    "embedding_for",
    "generated_token",
    "text_token_pool",
    "version_seed",
]

#: Multiplier of the prompt-id sum in the token rule.
TOKEN_PROMPT_FACTOR = 31
#: Multiplier of the output position in the token rule (a prime, so positions spread).
TOKEN_POSITION_STRIDE = 7919


def generated_token(pool: Sequence[int], prompt: Sequence[int], index: int, seed: int = 0) -> int:
    """Token ``index`` (0-based) of the output of ``prompt``, by the token rule."""
    if not pool:
        raise ValueError("the token pool is empty")
    slot = sum(prompt) * TOKEN_PROMPT_FACTOR + index * TOKEN_POSITION_STRIDE + seed
    return pool[slot % len(pool)]


def version_seed(seed: int, version: str) -> int:
    """The token rule's seed under weight ``version``: ``seed`` plus the first 8 bytes of
    the SHA-256 of the version's UTF-8 (docs/engine.md), ``seed`` itself for ``""``."""
    if not version:
        return seed
    return seed + int.from_bytes(hashlib.sha256(version.encode()).digest()[:8], "big")


def text_token_pool(
    vocab_size: int, decode: Callable[[list[int]], str], special_ids: Iterable[int] = ()
) -> tuple[int, ...]:
    """The ids below ``vocab_size``, not in ``special_ids``, that decode to printable text.

    Raises ``ValueError`` when no id qualifies.
    """
    special = frozenset(special_ids)
    pool = []
    for token_id in range(vocab_size):
        if token_id in special:
            continue
        text = decode([token_id])
        if text and text.isprintable() and "\ufffd" not in text:
            pool.append(token_id)
    if not pool:
        raise ValueError("no token decodes to printable text")
    return tuple(pool)


def embedding_for(prompt: Sequence[int], dimension: int = 64, seed: int = 0) -> list[float]:
    """The unit-length embedding of ``prompt`` by the embedding rule."""
    digest = hashlib.blake2b(repr((seed, list(prompt))).encode(), digest_size=16).digest()
    rng = random.Random(digest)  # noqa: S311 (deterministic, not secret)
    values = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = math.sqrt(sum(value * value for value in values)) or 1.0
    return [value / norm for value in values]
