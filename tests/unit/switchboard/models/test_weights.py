"""The generated tensors: llama.cpp's names and shapes, and a recipe whose dot products
do not depend on summation order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from switchboard.models.positional import BIAS_DIM, bias_value
from switchboard.models.spec import BENCH, TINY, ModelSpec
from switchboard.models.weights import TensorPlan, tensor_plan, tensor_values
from tests.unit.switchboard.models.small import SMALL_VOCAB_SIZE

#: Tensors whose rows are sparse sums of the content (two powers of two per row).
SPARSE_KINDS = ("attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output")


def plan_by_name(spec: ModelSpec = TINY) -> dict[str, TensorPlan]:
    return {tensor.name: tensor for tensor in tensor_plan(spec, SMALL_VOCAB_SIZE)}


def values(name: str, spec: ModelSpec = TINY) -> np.ndarray:
    return tensor_values(spec, plan_by_name(spec)[name])


class TestPlan:
    """Every tensor llama.cpp's llama loader asks for, in numpy (reversed GGUF) shapes."""

    def test_names_and_shapes(self) -> None:
        """TINY's tensors are token_embd, each block's nine, output_norm and output."""
        spec = dataclasses.replace(TINY, n_head_kv=2)
        shapes = {tensor.name: tensor.shape for tensor in tensor_plan(spec, SMALL_VOCAB_SIZE)}
        expected: dict[str, tuple[int, ...]] = {"token_embd.weight": (SMALL_VOCAB_SIZE, 64)}
        for layer in range(2):
            block = f"blk.{layer}."
            expected |= {
                block + "attn_norm.weight": (64,),
                block + "attn_q.weight": (64, 64),
                block + "attn_k.weight": (32, 64),
                block + "attn_v.weight": (32, 64),
                block + "attn_output.weight": (64, 64),
                block + "ffn_norm.weight": (64,),
                block + "ffn_gate.weight": (172, 64),
                block + "ffn_up.weight": (172, 64),
                block + "ffn_down.weight": (64, 172),
            }
        expected |= {"output_norm.weight": (64,), "output.weight": (SMALL_VOCAB_SIZE, 64)}
        assert shapes == expected

    def test_sizes_add_up_to_the_parameter_count(self) -> None:
        """The plan's sizes sum to ModelSpec.parameter_count, for both named specs."""
        for spec in (TINY, BENCH):
            total = sum(tensor.size for tensor in tensor_plan(spec, 32000))
            assert total == spec.parameter_count(32000)

    def test_a_vocabulary_needs_two_tokens(self) -> None:
        """A one-token vocabulary is refused."""
        with pytest.raises(ValueError, match="at least 2 tokens"):
            tensor_plan(TINY, 1)


class TestDeterminism:
    """Values depend on the spec's seed and the tensor's name only."""

    def test_same_values_on_every_call(self) -> None:
        """Two draws of a tensor are the same bits, whatever was drawn in between."""
        first = values("blk.1.ffn_up.weight")
        values("blk.0.ffn_up.weight")
        assert np.array_equal(first, values("blk.1.ffn_up.weight"))

    def test_seed_changes_the_random_tensors(self) -> None:
        """Another seed gives other embeddings and projections, the same norms."""
        other = dataclasses.replace(TINY, seed=1)
        assert not np.array_equal(values("token_embd.weight"), values("token_embd.weight", other))
        assert not np.array_equal(values("output.weight"), values("output.weight", other))
        assert np.array_equal(values("output_norm.weight"), values("output_norm.weight", other))

    def test_values_are_float32(self) -> None:
        """Every tensor is f32, as the model file declares."""
        for tensor in tensor_plan(TINY, SMALL_VOCAB_SIZE):
            assert tensor_values(TINY, tensor).dtype == np.float32, tensor.name


class TestExactRecipe:
    """Rows llama.cpp sums in any order to the same bits, and a constant dimension that
    only attention reads."""

    @pytest.mark.parametrize("kind", SPARSE_KINDS)
    def test_two_powers_of_two_per_row(self, kind: str) -> None:
        """Each row of a content projection has two nonzero weights, each +-2^k."""
        for tensor in tensor_plan(TINY, SMALL_VOCAB_SIZE):
            if tensor.kind != kind:
                continue
            weights = tensor_values(TINY, tensor)
            rows = weights[:-1] if kind in ("attn_output", "ffn_down") else weights
            assert set((rows != 0).sum(axis=1)) == {2}, tensor.name
            exponents = np.log2(np.abs(rows[rows != 0]))
            assert np.array_equal(exponents, np.round(exponents)), tensor.name

    def test_sums_do_not_depend_on_order(self) -> None:
        """A sparse row's dot product in float32 is the same bits summed forwards or
        backwards (a dense row's is not, in general)."""
        weights = values("output.weight")[:50]
        content = np.random.default_rng(7).standard_normal(64).astype(np.float32)
        products = weights * content
        forwards = [np.float32(0)] * 50
        backwards = [np.float32(0)] * 50
        for row in range(50):
            for column in range(64):
                forwards[row] = np.float32(forwards[row] + products[row, column])
                backwards[row] = np.float32(backwards[row] + products[row, 63 - column])
        assert forwards == backwards

    def test_constant_dimension(self) -> None:
        """The last dimension holds the same constant in every embedding row; no layer
        writes it, and only queries and keys read it."""
        embedding = values("token_embd.weight")
        assert np.all(embedding[:, BIAS_DIM] == np.float32(bias_value(TINY)))
        for tensor in tensor_plan(TINY, SMALL_VOCAB_SIZE):
            weights = tensor_values(TINY, tensor)
            if tensor.kind in ("attn_output", "ffn_down"):
                assert not weights[BIAS_DIM].any(), tensor.name
            if tensor.kind in ("attn_v", "ffn_gate", "ffn_up", "output"):
                assert not weights[:, BIAS_DIM].any(), tensor.name
            if tensor.kind in ("attn_q", "attn_k"):
                assert not weights[:, :BIAS_DIM].any(), tensor.name

    def test_embedding_rows_share_one_norm(self) -> None:
        """Every embedding row has the same RMS, so the first norm scales all alike."""
        norms = np.linalg.norm(values("token_embd.weight")[:, :BIAS_DIM], axis=1)
        assert np.allclose(norms, np.sqrt(63), rtol=1e-6)

    def test_output_rows_are_distinct(self) -> None:
        """No two tokens read the content alike, so no two logits tie exactly."""
        output = values("output.weight")
        assert len(np.unique(output, axis=0)) == SMALL_VOCAB_SIZE
