"""Greedy decoding of several sequences in one llama.cpp batch, for tests of models.

:class:`GreedyDecoder` drives llama-cpp-python's low-level API: one context with
``n_seq_max`` sequences in a unified KV cache, each prompt its own sequence id, every
step one ``llama_decode`` of one token per sequence, the next token the argmax of its
logits (numpy). It records each step's margin (top-1 minus top-2 logit), the statistic
that says how far greedy choices are from a float-rounding tie.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GreedyDecoder", "GreedyRun", "greedy_decoder"]


@dataclass
class GreedyRun:
    """What a decode produced: each sequence's new tokens, and each step's logits and
    margin (top-1 minus top-2 logit), step by step, sequence by sequence."""

    tokens: list[list[int]]
    margins: list[float] = field(default_factory=list)
    logits: list[np.ndarray[Any, np.dtype[np.float32]]] = field(default_factory=list)


class GreedyDecoder:
    """Greedy decoding over one llama.cpp context (made by :func:`greedy_decoder`)."""

    def __init__(self, llama: Any, model: Any, context: Any, n_seq_max: int) -> None:
        self._llama = llama
        self._context = context
        self._n_seq_max = n_seq_max
        vocab = llama.llama_model_get_vocab(model)
        self.n_vocab = int(llama.llama_vocab_n_tokens(vocab))
        self._vocab = vocab

    def tokenize(self, text: str) -> list[int]:
        """``text``'s tokens, with the BOS token if the vocabulary adds one."""
        encoded = text.encode()
        room = len(encoded) + 8
        buffer = (self._llama.llama_token * room)()
        count = self._llama.llama_tokenize(
            self._vocab, encoded, len(encoded), buffer, room, True, False
        )
        assert count >= 0, f"tokenize needs {-count} slots"
        return list(buffer[:count])

    def _logits(self, index: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        pointer = self._llama.llama_get_logits_ith(self._context, index)
        array = np.ctypeslib.as_array(
            ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,)
        )
        return array.copy()

    def _decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of ``(token, position, sequence, wants logits)`` rows."""
        llama = self._llama
        batch = llama.llama_batch_init(len(rows), 0, 1)
        try:
            for index, (token, position, sequence, wants) in enumerate(rows):
                batch.token[index] = token
                batch.pos[index] = position
                batch.n_seq_id[index] = 1
                batch.seq_id[index][0] = sequence
                batch.logits[index] = wants
            batch.n_tokens = len(rows)
            status = llama.llama_decode(self._context, batch)
            assert status == 0, f"llama_decode returned {status}"
        finally:
            llama.llama_batch_free(batch)

    def run(self, prompts: Sequence[Sequence[int]], steps: int) -> GreedyRun:
        """Decode ``prompts`` together, sequence ``i`` for prompt ``i``, ``steps`` greedy
        tokens each, starting from an empty KV cache."""
        assert 0 < len(prompts) <= self._n_seq_max
        llama = self._llama
        memory = llama.llama_get_memory(self._context)
        llama.llama_memory_clear(memory, True)
        rows = [
            (token, position, sequence, position == len(prompt) - 1)
            for sequence, prompt in enumerate(prompts)
            for position, token in enumerate(prompt)
        ]
        self._decode(rows)
        result = GreedyRun(tokens=[[] for _ in prompts])
        positions = [len(prompt) for prompt in prompts]
        # Logits are asked for by batch row: each prompt's last row, then one row each.
        last_rows = [index for index, row in enumerate(rows) if row[3]]
        for step in range(steps):
            step_rows = []
            for sequence in range(len(prompts)):
                logits = self._logits(last_rows[sequence])
                top_two = np.partition(logits, -2)[-2:]
                result.margins.append(float(top_two[1] - top_two[0]))
                result.logits.append(logits)
                token = int(np.argmax(logits))
                result.tokens[sequence].append(token)
                step_rows.append((token, positions[sequence], sequence, True))
                positions[sequence] += 1
            if step + 1 < steps:
                self._decode(step_rows)
                last_rows = list(range(len(prompts)))
        return result


@contextmanager
def greedy_decoder(
    model_path: Path,
    *,
    n_ctx: int = 2048,
    n_seq_max: int = 8,
    n_threads: int = 2,
    **context_params: int,
) -> Iterator[GreedyDecoder]:
    """A :class:`GreedyDecoder` over ``model_path``, its model and context freed on exit."""
    import llama_cpp as llama

    llama.llama_backend_init()
    model_params = llama.llama_model_default_params()
    model = llama.llama_model_load_from_file(str(model_path).encode(), model_params)
    assert model, f"llama.cpp could not load {model_path}"
    try:
        params = llama.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_ctx
        params.n_seq_max = n_seq_max
        params.kv_unified = True
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        for name, value in context_params.items():
            setattr(params, name, value)
        context = llama.llama_init_from_model(model, params)
        assert context, "llama.cpp could not make a context"
        try:
            yield GreedyDecoder(llama, model, context, n_seq_max)
        finally:
            llama.llama_free(context)
    finally:
        llama.llama_model_free(model)
