"""The shape of a generated llama model: :class:`ModelSpec`, and the two named sizes.

A spec is everything besides the vocabulary that decides a generated model's bytes: its
dimensions, its rope and norm constants and the seed of its weights. :data:`TINY` is for
tests (a decode step takes well under a millisecond on two CPU cores); :data:`BENCH`
costs a decode step what a small real model does (8 layers of width 512: with the
32 000-token llama-spm vocabulary, 58 M f32 parameters, 233 MB).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["BENCH", "SPECS", "TINY", "ModelSpec"]

#: A spec's name goes into file names and the model's ``general.name``.
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A llama-architecture model's hyperparameters and weight seed.

    Construction checks what llama.cpp would otherwise reject at load time, or what
    would make the weights meaningless: every size positive, the width a whole number
    of heads, the query heads a whole number of key/value groups, an even head size
    (rope turns pairs of values; at least two pairs, which positional attention
    needs), positive finite constants. A bad spec is a :class:`ValueError` naming the
    field.
    """

    #: Lower-case letters, digits and dashes: part of the cached file's name.
    name: str
    n_layer: int
    #: The model width (``llama.embedding_length``).
    n_embd: int
    #: The feed-forward inner size (``llama.feed_forward_length``).
    n_ff: int
    n_head: int
    n_head_kv: int
    #: The context length the model declares (``llama.context_length``).
    n_ctx: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    #: Seeds every weight (numpy ``default_rng``); the same seed gives the same bytes.
    seed: int = 0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"name {self.name!r}: lower-case letters, digits and dashes only")
        for field in ("n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "n_ctx"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive whole number, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        if self.n_head % self.n_head_kv:
            raise ValueError(
                f"n_head {self.n_head} is not a multiple of n_head_kv {self.n_head_kv}"
            )
        if self.head_dim % 2 or self.head_dim < 4:
            raise ValueError(f"head size {self.head_dim} (n_embd / n_head) must be even, >= 4")
        for field in ("rope_theta", "rms_eps"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{field} must be a number, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field} must be positive and finite, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a whole number >= 0, got {self.seed!r}")

    @property
    def head_dim(self) -> int:
        """Values per attention head (``llama.rope.dimension_count``: rope turns all)."""
        return self.n_embd // self.n_head

    def parameter_count(self, vocab_size: int) -> int:
        """Weights of the model with a ``vocab_size``-token vocabulary (embedding and
        output projection untied, as written)."""
        kv_width = self.n_head_kv * self.head_dim
        attention = 2 * self.n_embd * self.n_embd + 2 * self.n_embd * kv_width
        per_layer = attention + 3 * self.n_embd * self.n_ff + 2 * self.n_embd
        return self.n_layer * per_layer + 2 * vocab_size * self.n_embd + self.n_embd

    def as_record(self) -> dict[str, object]:
        """Every field by name: what the cache key hashes and the model file records."""
        return dataclasses.asdict(self)


#: For tests: a decode step of one sequence costs well under a millisecond on 2 cores.
TINY: Final = ModelSpec(
    name="tiny", n_layer=2, n_embd=64, n_ff=172, n_head=4, n_head_kv=4, n_ctx=4096
)

#: For benchmarks: the per-token cost of a small real model (issue 20's figures: with
#: the llama-spm vocabulary 58 M parameters, about 179 tokens/s greedy on 2 threads).
BENCH: Final = ModelSpec(
    name="bench", n_layer=8, n_embd=512, n_ff=1376, n_head=8, n_head_kv=8, n_ctx=4096
)

#: The named specs, as ``switchboard models build --size`` takes them.
SPECS: Final[Mapping[str, ModelSpec]] = MappingProxyType({"tiny": TINY, "bench": BENCH})
