"""Hard positional attention: each head attends one key, a fixed offset back, by a wide
margin, so its output is exactly that key's value in any precision."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from switchboard.models.positional import (
    MAX_OFFSET,
    SEPARATION,
    head_offset,
    positional_columns,
    score_gaps,
)
from switchboard.models.positional import _pair_weights as pair_weights
from switchboard.models.spec import BENCH, TINY, ModelSpec
from switchboard.models.weights import tensor_plan, tensor_values
from tests.support.llama_reference import ReferenceRun, forward
from tests.unit.switchboard.models.small import SMALL_VOCAB_SIZE

#: BENCH's head size and depth at a width that runs in milliseconds.
BENCH_LIKE = dataclasses.replace(
    BENCH, name="bench-like", n_embd=128, n_head=2, n_head_kv=2, n_ff=96
)


def reference(spec: ModelSpec, tokens: list[int]) -> ReferenceRun:
    weights = {
        tensor.name: tensor_values(spec, tensor).astype(np.float64)
        for tensor in tensor_plan(spec, SMALL_VOCAB_SIZE)
    }
    return forward(spec, weights, tokens)


def prompt(length: int, seed: int = 3) -> list[int]:
    return [1, *np.random.default_rng(seed).integers(3, SMALL_VOCAB_SIZE, length - 1).tolist()]


class TestDesign:
    """The query and key columns, before any model runs."""

    def test_offsets_cover_one_to_max(self) -> None:
        """Four heads of a layer look 1 .. MAX_OFFSET back, each layer in another order."""
        for layer in range(3):
            assert sorted(head_offset(layer, head) for head in range(4)) == [1, 2, 3, 4]
        assert head_offset(0, 0) != head_offset(1, 0)
        assert MAX_OFFSET == 4

    @pytest.mark.parametrize("spec", [TINY, BENCH], ids=["tiny", "bench"])
    def test_every_other_key_is_separated(self, spec: ModelSpec) -> None:
        """At the nominal scale, every key but the attended one, nearer or as far back
        as the context goes, scores at least SEPARATION lower (softmax units)."""
        for offset in range(1, MAX_OFFSET + 1):
            gaps = score_gaps(spec, pair_weights(spec, offset), offset) / np.sqrt(spec.head_dim)
            assert gaps.min() >= SEPARATION * (1 - 1e-9), offset

    def test_columns_fit_in_f16(self) -> None:
        """Queries and keys stay far inside f16's range (the KV cache's type)."""
        for spec in (TINY, BENCH):
            for layer in range(spec.n_layer):
                query, key = positional_columns(spec, layer)
                assert query.shape == (spec.n_embd,) and key.shape == (
                    spec.n_head_kv * spec.head_dim,
                )
                assert max(abs(query).max(), abs(key).max()) * np.sqrt(spec.n_embd) < 1000

    def test_grouped_heads_share_a_constant_key(self) -> None:
        """With fewer key heads, every key head is the same constant (offsets are in the
        queries), so heads of one group can look at different offsets."""
        spec = dataclasses.replace(TINY, n_head_kv=2)
        _, key = positional_columns(spec, 0)
        halves = key.reshape(2, spec.head_dim)
        assert np.array_equal(halves[0], halves[1])


class TestInTheModel:
    """The numpy reference forward pass of whole generated models."""

    @pytest.mark.parametrize("spec", [TINY, BENCH_LIKE], ids=["tiny", "bench-like"])
    def test_each_head_attends_its_offset(self, spec: ModelSpec) -> None:
        """In every layer, each head's weight on the key its offset back (the first
        token, for queries nearer the start) is 1 to float64 precision, and every other
        key scores at least half of SEPARATION lower."""
        run = reference(spec, prompt(48))
        queries = np.arange(48)
        for layer, (scores, weights) in enumerate(zip(run.scores, run.weights, strict=True)):
            for head in range(spec.n_head):
                attended = np.maximum(queries - head_offset(layer, head), 0)
                assert np.all(weights[head, queries, attended] > 1 - 1e-15), (layer, head)
                best = scores[head, queries, attended]
                others = scores[head].copy()
                others[queries, attended] = -np.inf
                assert np.all(best[1:] - others.max(axis=1)[1:] > SEPARATION / 2), (layer, head)

    def test_next_token_depends_on_recent_tokens_only(self) -> None:
        """TINY's last logits change with the token 3 back, and not (beyond float64
        rounding) with one farther back than two layers of offsets reach."""
        tokens = prompt(20)
        base = reference(TINY, tokens).logits[-1]
        near, far = list(tokens), list(tokens)
        near[-4] = 7 if near[-4] != 7 else 8
        far[-2 * MAX_OFFSET - 2] = 7 if far[-2 * MAX_OFFSET - 2] != 7 else 8
        assert np.abs(reference(TINY, near).logits[-1] - base).max() > 0.1
        assert np.allclose(reference(TINY, far).logits[-1], base, rtol=0, atol=1e-9)
