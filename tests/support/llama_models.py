"""Generated GGUF models for engine tests, and what llama.cpp itself makes of them.

:func:`tiny_model` is the TINY spec on the llama-spm vocabulary of the llama-cpp-python
sdist, built once into the model cache (:func:`switchboard.models.build_model`).
:func:`greedy_alone` is the reference an engine is checked against: the tokens
llama-cpp-python's own high-level ``Llama`` generates greedily for one prompt, alone in
its context. Both skip (a failure under ``CI=true`` for integration tests) when the
``llama`` extra or the sdist is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.llama_vocab import vocab_file

__all__ = ["GreedyReference", "tiny_model"]


@functools.cache
def tiny_model() -> Path:
    """The tiny test model (TINY on the llama-spm vocabulary), built on first use."""
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make llama)")
    from switchboard.models import TINY, GGUFVocab, build_model

    return build_model(TINY, GGUFVocab(vocab_file("llama-spm")))


class GreedyReference:
    """llama-cpp-python's ``Llama`` on one model: greedy tokens of each prompt alone."""

    def __init__(self, model: Path, n_ctx: int = 1024) -> None:
        import llama_cpp

        from switchboard.text.llama_runtime import llama_api

        llama_api()  # llama.cpp's own log goes to the logger, not stderr
        # verbose=False would wrap every call in llama-cpp-python's stdout/stderr
        # suppressor, which leaves /dev/null handles for the garbage collector to close
        # (ResourceWarning, an error in this suite).
        self._llama: Any = llama_cpp.Llama(
            model_path=str(model), n_ctx=n_ctx, n_threads=1, verbose=True
        )
        self._cache: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def tokens(self, prompt: Sequence[int], count: int) -> list[int]:
        """The first ``count`` greedy tokens after ``prompt`` (EOS not treated specially)."""
        key = (tuple(prompt), count)
        if key not in self._cache:
            made: list[int] = []
            for token in self._llama.generate(list(prompt), temp=0.0, top_k=1, reset=True):
                made.append(int(token))
                if len(made) == count:
                    break
            self._cache[key] = made
        return list(self._cache[key])

    def text_tokens(self, text: str) -> list[int]:
        """``text`` as the model's tokenizer encodes a prompt (BOS added, specials literal)."""
        ids: list[int] = self._llama.tokenize(text.encode(), add_bos=True, special=False)
        return ids

    def close(self) -> None:
        self._llama.close()
