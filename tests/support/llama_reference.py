"""A numpy forward pass of the llama architecture, for checking generated weights
without llama.cpp: RMS norm, RoPE on consecutive pairs (llama.cpp's "normal" RoPE),
causal grouped-query attention scaled by 1/sqrt(head_dim), a SwiGLU feed-forward, in
float64.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from switchboard.models.spec import ModelSpec

__all__ = ["ReferenceRun", "forward"]

Array = npt.NDArray[np.float64]


@dataclass
class ReferenceRun:
    """What :func:`forward` computed: logits per position, and per layer the attention
    scores (softmax units, masked ones -inf) and weights, ``(head, query, key)``."""

    logits: Array
    scores: list[Array] = field(default_factory=list)
    weights: list[Array] = field(default_factory=list)


def _rms_norm(values: Array, scale: Array, eps: float) -> Array:
    normed: Array = values / np.sqrt((values * values).mean(-1, keepdims=True) + eps) * scale
    return normed


def _rope(values: Array, theta: float) -> Array:
    """``values`` ``(position, head, head_dim)``, pairs (2i, 2i+1) turned by pos * theta_i."""
    positions, _, head_dim = values.shape
    frequencies = theta ** (-2.0 * np.arange(head_dim // 2) / head_dim)
    angles = np.arange(positions)[:, None, None] * frequencies[None, None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    even, odd = values[..., 0::2], values[..., 1::2]
    turned = np.empty_like(values)
    turned[..., 0::2] = even * cos - odd * sin
    turned[..., 1::2] = even * sin + odd * cos
    return turned


def forward(spec: ModelSpec, weights: Mapping[str, Array], tokens: Sequence[int]) -> ReferenceRun:
    """Run ``tokens`` through the model of ``spec`` with tensors ``weights`` (by GGUF
    name, numpy shapes as :mod:`switchboard.models.weights` makes them)."""
    count, heads, kv_heads, size = len(tokens), spec.n_head, spec.n_head_kv, spec.head_dim
    hidden = weights["token_embd.weight"][list(tokens)]
    causal = np.tril(np.ones((count, count), dtype=bool))
    run = ReferenceRun(logits=np.empty(0))
    for layer in range(spec.n_layer):
        block = f"blk.{layer}."
        normed = _rms_norm(hidden, weights[block + "attn_norm.weight"], spec.rms_eps)
        query = (normed @ weights[block + "attn_q.weight"].T).reshape(count, heads, size)
        key = (normed @ weights[block + "attn_k.weight"].T).reshape(count, kv_heads, size)
        value = (normed @ weights[block + "attn_v.weight"].T).reshape(count, kv_heads, size)
        query, key = _rope(query, spec.rope_theta), _rope(key, spec.rope_theta)
        group = heads // kv_heads
        key, value = np.repeat(key, group, axis=1), np.repeat(value, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", query, key) / np.sqrt(size)
        scores = np.where(causal[None], scores, -np.inf)
        attention = np.exp(scores - scores.max(-1, keepdims=True))
        attention /= attention.sum(-1, keepdims=True)
        run.scores.append(scores)
        run.weights.append(attention)
        mixed = np.einsum("hqk,khd->qhd", attention, value).reshape(count, heads * size)
        hidden = hidden + mixed @ weights[block + "attn_output.weight"].T
        normed = _rms_norm(hidden, weights[block + "ffn_norm.weight"], spec.rms_eps)
        gate = normed @ weights[block + "ffn_gate.weight"].T
        up = normed @ weights[block + "ffn_up.weight"].T
        hidden = hidden + (gate / (1.0 + np.exp(-gate)) * up) @ weights[block + "ffn_down.weight"].T
    normed = _rms_norm(hidden, weights["output_norm.weight"], spec.rms_eps)
    run.logits = normed @ weights["output.weight"].T
    return run
