"""Hard positional attention: every head of a generated model looks at one fixed offset.

Why: llama.cpp computes attention with different kernels for one sequence and for a
batch (flash attention tiles several queries and accumulates in f32, and takes a lone
query in f16), so with soft attention a sequence decoded in a batch sees outputs some
1e-3 (relative) off its solo run, and over a thousand greedy steps some top-1/top-2
gap is smaller than that: measured, a batch of 32 then decoded a token its solo run did
not. If each head's scores single out one key by a wide gap (:data:`SEPARATION`, in
softmax units), its weights are exactly 1 and 0 in either precision and its output is
exactly the value attended to. The model stays context dependent: head ``h`` of layer
``l`` copies what is :func:`head_offset` tokens back, so the next token is a function
of the last several, and a KV cache mixed up between sequences or positions changes it.

The scores do not depend on content: the residual stream has one constant dimension
(:data:`BIAS_DIM`, the last), and queries and keys read only it. With RoPE a constant
query and key score ``sum_i w_i cos(theta_i (m - n) - psi_i)`` for positions ``m``
(query) and ``n`` (key), ``w_i`` the product of their amplitudes in pair ``i``: with
``psi_i = theta_i * offset`` every term peaks at ``m - n = offset``. Pairs turning more
than a quarter turn over ``offset`` are left out, so the score rises steadily towards
the peak from nearer keys, and a query before ``offset`` attends the first token.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from switchboard.models.spec import ModelSpec

__all__ = [
    "BIAS_DIM",
    "CONTENT_SHRINK",
    "MAX_OFFSET",
    "SEPARATION",
    "bias_value",
    "head_offset",
    "normed_bias",
    "positional_columns",
    "score_gaps",
]

#: The residual dimension that holds a constant (:func:`bias_value`) in every position.
BIAS_DIM: Final = -1

#: Heads look 1 .. MAX_OFFSET tokens back. A farther offset leaves only slow RoPE
#: frequencies to tell neighbouring keys apart, which needs scores too large for f16.
MAX_OFFSET: Final = 4

#: The least gap, in softmax units (after llama.cpp's 1/sqrt(head_dim) scale), between
#: the attended key's score and any other's, when the constant dimension has its
#: nominal normed value. exp(-SEPARATION) times a 4096-token context is far below f32
#: rounding, with room for the normed constant to shrink as the residual grows.
SEPARATION: Final = 80.0

#: How much larger the constant is than the rest of a row. A key's score scales with
#: the normed constant of its position, which the norm of the rest of the row sways;
#: a peak score is some 40 times :data:`SEPARATION`, so it must hold to well within
#: 1 %. With the rest of the row 1/16 of the constant, a doubling of the rest's mean
#: square moves it by 0.3 %. What reads the content scales up by as much.
CONTENT_SHRINK: Final = 16.0

#: Weightings tried for the RoPE pairs, ``theta_i ** power``: which is best depends on
#: the head size and offset (see :func:`_pair_weights`).
_POWERS: Final = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def bias_value(spec: ModelSpec) -> float:
    """The constant in :data:`BIAS_DIM`: :data:`CONTENT_SHRINK` times the norm of the
    other dimensions of an embedding row (each of unit mean square)."""
    return CONTENT_SHRINK * float(np.sqrt(spec.n_embd - 1))


def normed_bias(spec: ModelSpec) -> float:
    """The constant dimension's value after the RMS norm of an embedding row: about
    ``sqrt(n_embd)``, as the constant dominates the row's mean square."""
    shrink = CONTENT_SHRINK
    return float(np.sqrt(spec.n_embd) * shrink / np.sqrt(shrink**2 + 1))


def head_offset(layer: int, head: int) -> int:
    """How many tokens back head ``head`` of layer ``layer`` looks (1 .. MAX_OFFSET;
    layers rotate the offsets so that each layer's heads see different ones first)."""
    return 1 + (head + layer) % MAX_OFFSET


def _frequencies(spec: ModelSpec) -> npt.NDArray[np.float64]:
    pairs = np.arange(spec.head_dim // 2)
    frequencies: npt.NDArray[np.float64] = spec.rope_theta ** (-2.0 * pairs / spec.head_dim)
    return frequencies


def _other_keys(spec: ModelSpec, offset: int) -> npt.NDArray[np.float64]:
    """``(m - n) - offset`` for every key but the attended one: nearer keys down to the
    query itself, farther ones back to the start of the context."""
    return np.concatenate([np.arange(-offset, 0), np.arange(1, spec.n_ctx)]).astype(np.float64)


def score_gaps(
    spec: ModelSpec, weights: npt.NDArray[np.float64], offset: int
) -> npt.NDArray[np.float64]:
    """Raw score gaps ``sum_i w_i (1 - cos(theta_i d))`` for every other key's distance
    ``d`` from the attended one, with pair weights ``weights`` (``a_i^2``)."""
    distances = _other_keys(spec, offset)
    turns = 1.0 - np.cos(np.outer(distances, _frequencies(spec)))
    gaps: npt.NDArray[np.float64] = turns @ weights
    return gaps


def _pair_weights(spec: ModelSpec, offset: int) -> npt.NDArray[np.float64]:
    """The pair weights, scaled to :data:`SEPARATION`, with the least total.

    The total bounds the scores, and so their f16 rounding error: of the weightings
    :data:`_POWERS` the one with the largest least-gap per unit of total wins.
    """
    frequencies = _frequencies(spec)
    usable = frequencies * offset <= np.pi / 2
    if not usable.any():
        raise ValueError(f"no RoPE frequency of head size {spec.head_dim} fits offset {offset}")
    best: npt.NDArray[np.float64] | None = None
    best_merit = 0.0
    for power in _POWERS:
        weights = np.where(usable, frequencies**power, 0.0)
        weights /= weights.sum()
        merit = float(score_gaps(spec, weights, offset).min())
        if merit > best_merit:
            best, best_merit = weights, merit
    if best is None:
        raise ValueError(f"head size {spec.head_dim} cannot separate offset {offset}")
    scale = np.sqrt(spec.head_dim)  # undoes llama.cpp's 1/sqrt(head_dim)
    scaled: npt.NDArray[np.float64] = best * (SEPARATION * scale / best_merit)
    return scaled


def positional_columns(
    spec: ModelSpec, layer: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The :data:`BIAS_DIM` columns of layer ``layer``'s query and key projections (all
    their other columns are 0): ``n_head * head_dim`` and ``n_head_kv * head_dim`` values.

    Every key head is the same constant, ``(c_i, 0)`` in RoPE pair ``i``, so heads
    sharing a key head (grouped-query attention) can look at different offsets: the
    offset is in the query, ``(w_i / c_i) (cos psi_i, -sin psi_i)`` with ``psi_i =
    theta_i * head_offset(layer, h)`` and ``w_i`` the pair weights of that offset.
    ``c_i`` is the square root of the largest weight of pair ``i`` over the offsets in
    use, which keeps query and key values of one size (both within f16's range).
    """
    frequencies = _frequencies(spec)
    offsets = [head_offset(layer, head) for head in range(spec.n_head)]
    weights = {offset: _pair_weights(spec, offset) for offset in set(offsets)}
    key_pairs = np.sqrt(np.max(np.stack(list(weights.values())), axis=0))
    # A pair no offset uses has key 0; its query weight is 0 too.
    safe_keys = np.where(key_pairs > 0, key_pairs, 1.0)
    query = np.zeros((spec.n_head, spec.head_dim), dtype=np.float64)
    for head, offset in enumerate(offsets):
        amplitude = weights[offset] / safe_keys
        turn = frequencies * offset
        query[head, 0::2] = amplitude * np.cos(turn)
        query[head, 1::2] = -amplitude * np.sin(turn)
    key = np.zeros((spec.n_head_kv, spec.head_dim), dtype=np.float64)
    key[:, 0::2] = key_pairs
    normed = normed_bias(spec)
    # The columns multiply the normed constant, so each carries 1/normed of the value.
    return (
        (query.reshape(-1) / normed).astype(np.float32),
        (key.reshape(-1) / normed).astype(np.float32),
    )
