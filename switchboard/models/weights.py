"""The tensors of a generated llama model: names, shapes and deterministic values.

Names and shapes are the ones llama.cpp's llama loader asks for. Shapes here are numpy
shapes, ``(rows, columns)``, which GGUF stores reversed: a projection from width ``n``
to width ``m`` is an ``(m, n)`` array whose GGUF dimensions read ``{n, m}``, as
``token_embd.weight`` is ``(n_vocab, n_embd)`` here and ``{n_embd, n_vocab}`` in
``llama-model.cpp``.

The recipe (:func:`tensor_values`) makes a model whose logits are the same bits for a
sequence decoded alone or in any batch, on any llama.cpp kernel: attention is hard and
positional (:mod:`switchboard.models.positional`), and every other projection row has
two nonzero weights, each a power of two (:func:`_sparse`), so no dot product depends
on the order it is summed in. Embedding rows are random directions, norm scales are 1.
The compute is that of a dense model of the same shape: llama.cpp multiplies the
zeros too. Each tensor is drawn from its own generator, seeded by the spec's seed and
the tensor's name, so its values do not depend on the order tensors are made in and a
model can be written one tensor at a time.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from switchboard.models.positional import (
    BIAS_DIM,
    CONTENT_SHRINK,
    bias_value,
    positional_columns,
)
from switchboard.models.spec import ModelSpec

__all__ = ["TensorPlan", "tensor_plan", "tensor_values"]

Weights = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class TensorPlan:
    """One tensor to write: its GGUF name, numpy shape, what it is and its layer."""

    name: str
    shape: tuple[int, ...]
    #: The recipe's key: ``norm``, ``token_embd``, ``attn_q`` ... ``output``.
    kind: str
    layer: int = -1

    @property
    def size(self) -> int:
        """Number of values."""
        return int(np.prod(self.shape))


def _layer(spec: ModelSpec, layer: int) -> Iterator[TensorPlan]:
    width, ff = spec.n_embd, spec.n_ff
    kv_width = spec.n_head_kv * spec.head_dim
    shapes = {
        "attn_norm": (width,),
        "attn_q": (width, width),
        "attn_k": (kv_width, width),
        "attn_v": (kv_width, width),
        "attn_output": (width, width),
        "ffn_norm": (width,),
        "ffn_gate": (ff, width),
        "ffn_up": (ff, width),
        "ffn_down": (width, ff),
    }
    for part, shape in shapes.items():
        kind = "norm" if part.endswith("_norm") else part
        yield TensorPlan(f"blk.{layer}.{part}.weight", shape, kind, layer)


def tensor_plan(spec: ModelSpec, vocab_size: int) -> list[TensorPlan]:
    """Every tensor of ``spec``'s model with a ``vocab_size``-token vocabulary, in the
    order they are written (the output projection is untied from the embedding)."""
    if vocab_size < 2:
        raise ValueError(f"a vocabulary needs at least 2 tokens, got {vocab_size}")
    plan = [TensorPlan("token_embd.weight", (vocab_size, spec.n_embd), "token_embd")]
    for layer in range(spec.n_layer):
        plan.extend(_layer(spec, layer))
    plan.append(TensorPlan("output_norm.weight", (spec.n_embd,), "norm"))
    plan.append(TensorPlan("output.weight", (vocab_size, spec.n_embd), "output"))
    return plan


def _normal(generator: np.random.Generator, shape: tuple[int, ...], std: float) -> Weights:
    values = generator.standard_normal(shape, dtype=np.float32)
    values *= np.float32(std)
    return values


def _sparse(
    generator: np.random.Generator,
    shape: tuple[int, int],
    columns: int,
    magnitudes: tuple[float, ...],
) -> Weights:
    """Rows with two nonzero weights each, in two different of the first ``columns``
    columns, each a random sign times one of ``magnitudes`` (powers of two).

    Why two and powers of two: a product by a power of two is exact and a sum of two
    exact terms is the same in any order, so the row's dot product is the same bits
    whichever kernel, lane layout or batch size llama.cpp computes it with; three
    terms would not be (float addition is not associative).
    """
    rows = shape[0]
    values = np.zeros(shape, dtype=np.float32)
    first = generator.integers(0, columns, size=rows)
    # A second column different from the first: a nonzero shift, modulo the columns.
    second = (first + generator.integers(1, columns, size=rows)) % columns
    for picked in (first, second):
        signs = generator.choice(np.array([-1.0, 1.0], dtype=np.float32), size=rows)
        sizes = generator.choice(np.array(magnitudes, dtype=np.float32), size=rows)
        values[np.arange(rows), picked] = signs * sizes
    return values


def _norm(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
    return np.ones(tensor.shape, dtype=np.float32)


def _token_embd(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
    """Random directions of one norm (unit mean square), and the constant: every row's
    RMS is the same, so the normed constant is too, in the first layer exactly."""
    values = _normal(generator, tensor.shape, 1.0)
    values[:, BIAS_DIM] = 0.0
    values *= np.sqrt(spec.n_embd - 1) / np.linalg.norm(values, axis=1, keepdims=True)
    values[:, BIAS_DIM] = bias_value(spec)
    return values


def _reading_content(
    magnitudes: tuple[float, ...],
) -> Callable[[ModelSpec, TensorPlan, np.random.Generator], Weights]:
    """A projection of the residual stream's content (every dimension but the
    constant), rows of two weights of ``magnitudes``."""

    def make(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
        rows, columns = tensor.shape
        # The constant is the last column: the content is the ones before it.
        assert BIAS_DIM == -1
        return _sparse(generator, (rows, columns), columns - 1, magnitudes)

    return make


def _write_size(spec: ModelSpec) -> float:
    """The power of two a layer's output weights have: about 1 / (2 sqrt(n_layer)), so
    that all layers together add a few times the embedding's mean square to the
    content, and the normed constant (the attention scores' scale) hardly moves."""
    return float(2.0 ** -np.ceil(np.log2(2.0 * np.sqrt(spec.n_layer))))


def _writing_residual(
    spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator
) -> Weights:
    """A layer's output projection, onto the content: the constant dimension's row 0."""
    rows, columns = tensor.shape
    values = _sparse(generator, (rows, columns), columns, (_write_size(spec),))
    values[BIAS_DIM, :] = 0.0
    return values


def _attn_q(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
    values = np.zeros(tensor.shape, dtype=np.float32)
    values[:, BIAS_DIM] = positional_columns(spec, tensor.layer)[0]
    return values


def _attn_k(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
    values = np.zeros(tensor.shape, dtype=np.float32)
    values[:, BIAS_DIM] = positional_columns(spec, tensor.layer)[1]
    return values


def _output(spec: ModelSpec, tensor: TensorPlan, generator: np.random.Generator) -> Weights:
    """The output projection: each token's row two weights on the content, as
    :func:`_sparse` makes them, and no two tokens' rows the same while there are
    enough distinct rows (two columns, two signs, two of :data:`_OUTPUT` sizes), so
    no two tokens' logits tie exactly."""
    vocab, columns = tensor.shape
    sizes = np.array(_OUTPUT, dtype=np.float32)
    # Unordered column pairs: (a, b) with weights (x, y) is (b, a) with (y, x).
    firsts, seconds = np.triu_indices(columns - 1, k=1)
    kinds = 4 * len(sizes) ** 2
    total = len(firsts) * kinds
    picked = generator.choice(total, size=vocab, replace=vocab > total)
    pair, kind = np.divmod(picked, kinds)
    first, second = firsts[pair], seconds[pair]
    signs, size_pair = np.divmod(kind, len(sizes) ** 2)
    values = np.zeros(tensor.shape, dtype=np.float32)
    rows = np.arange(vocab)
    values[rows, first] = np.where(signs & 1, -1.0, 1.0) * sizes[size_pair // len(sizes)]
    values[rows, second] = np.where(signs & 2, -1.0, 1.0) * sizes[size_pair % len(sizes)]
    return values


#: The normed content is CONTENT_SHRINK times smaller than the embeddings' unit scale:
#: what reads it scales it back.
_READ: Final = (CONTENT_SHRINK,)
#: The output's sizes: a logit is up to 4 times another that reads the same content.
_OUTPUT: Final = (CONTENT_SHRINK, 2 * CONTENT_SHRINK, 4 * CONTENT_SHRINK)

#: How each kind of tensor is made.
_RECIPE: Final[Mapping[str, Callable[[ModelSpec, TensorPlan, np.random.Generator], Weights]]] = {
    "norm": _norm,
    "token_embd": _token_embd,
    "attn_q": _attn_q,
    "attn_k": _attn_k,
    "attn_v": _reading_content(_READ),
    "attn_output": _writing_residual,
    "ffn_gate": _reading_content(_READ),
    "ffn_up": _reading_content(_READ),
    "ffn_down": _writing_residual,
    "output": _output,
}


def tensor_values(spec: ModelSpec, tensor: TensorPlan) -> Weights:
    """The values of ``tensor`` in ``spec``'s model: the same on every call and machine
    (for one numpy version: its generators' streams are what the cache key records)."""
    # A name's CRC is a stable 32-bit number (Python's hash() is salted per process).
    generator = np.random.default_rng([spec.seed, zlib.crc32(tensor.name.encode())])
    return _RECIPE[tensor.kind](spec, tensor, generator)
