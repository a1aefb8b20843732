"""One llama.cpp model and context: feed a batch of tokens, read logits, free sequences.

:class:`LlamaRuntime` owns the model, one context whose KV cache is *unified* (every
sequence draws cells from one pool of ``n_ctx`` cells, so one request may use the whole
context and many short ones share it) and one decode batch of ``batch_size`` tokens.
Sequence ids ``0 .. sequences-1`` are the caller's to hand out. Not thread-safe; one
thread owns it. :meth:`close` frees everything (also on leaving ``with``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.engine.llama_cpp.model_file import ModelFileError, load_model
from switchboard.text.llama_runtime import llama_api, recent_errors

__all__ = ["DECODE_NO_KV_SLOT", "DecodeError", "FeedToken", "LlamaRuntime"]

#: ``llama_decode``'s status when the KV cache has no room for the batch; the memory is
#: left as it was before the call, so the caller may free cells and try again.
DECODE_NO_KV_SLOT = 1


class DecodeError(RuntimeError):
    """``llama_decode`` failed for a reason other than a full KV cache."""


@dataclass(frozen=True, slots=True)
class FeedToken:
    """One token of a batch: which sequence, where, and whether its logits are wanted."""

    token: int
    position: int
    sequence: int
    logits: bool


class LlamaRuntime:
    """A loaded model and its context (see the module docstring)."""

    def __init__(self, model_path: str | os.PathLike[str], config: LlamaConfig) -> None:
        self._api = llama_api()
        self.config = config
        self.model_path = os.fspath(model_path)
        self._model: Any = None
        self._ctx: Any = None
        self._batch: Any = None
        self._model = load_model(model_path)
        try:
            self._open_context()
        except BaseException:
            self.close()
            raise

    def _open_context(self) -> None:
        api = self._api
        params = api.llama_context_default_params()
        params.n_ctx = self.config.context_size
        params.n_batch = self.config.batch_size
        params.n_ubatch = self.config.batch_size
        params.n_seq_max = self.config.sequences
        params.n_threads = params.n_threads_batch = self.config.effective_threads
        params.kv_unified = True
        params.no_perf = True
        recent_errors()
        ctx = api.llama_init_from_model(self._model, params)
        if not ctx:
            reason = (recent_errors() or ["llama.cpp could not make a context for it"])[-1]
            raise ModelFileError(self.model_path, reason)
        self._ctx = ctx
        self._memory = api.llama_get_memory(ctx)
        self._vocab = api.llama_model_get_vocab(self._model)
        self.n_vocab: int = api.llama_vocab_n_tokens(self._vocab)
        #: KV cells in all (the requested size rounded up by llama.cpp).
        self.n_ctx: int = api.llama_n_ctx(ctx)
        self.n_ctx_train: int = api.llama_model_n_ctx_train(self._model)
        self._batch = api.llama_batch_init(self.config.batch_size, 0, 1)
        #: The model's end-of-generation tokens (EOS, EOT, ...).
        self.end_token_ids = frozenset(
            token for token in range(self.n_vocab) if api.llama_vocab_is_eog(self._vocab, token)
        )

    @property
    def context(self) -> Any:
        """The ``llama_context_p`` (for samplers)."""
        return self._ctx

    def decode(self, tokens: Sequence[FeedToken]) -> int:
        """Feed ``tokens`` (at most ``batch_size``) in one ``llama_decode``; 0 on success,
        :data:`DECODE_NO_KV_SLOT` when the KV cache is full. Raises :class:`DecodeError`."""
        batch = self._batch
        if len(tokens) > self.config.batch_size:
            raise ValueError(f"{len(tokens)} tokens exceed batch_size {self.config.batch_size}")
        for index, item in enumerate(tokens):
            batch.token[index] = item.token
            batch.pos[index] = item.position
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = item.sequence
            batch.logits[index] = 1 if item.logits else 0
        batch.n_tokens = len(tokens)
        status: int = self._api.llama_decode(self._ctx, batch)
        if status in (0, DECODE_NO_KV_SLOT):
            return status
        detail = "; ".join(recent_errors()) or "no detail from llama.cpp"
        raise DecodeError(f"llama_decode failed with status {status}: {detail}")

    def logits(self, index: int) -> npt.NDArray[np.float32]:
        """The logits of batch entry ``index`` of the last decode (a view; copy to keep)."""
        pointer = self._api.llama_get_logits_ith(self._ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def free_sequence(self, sequence: int) -> None:
        """Drop every KV cell of ``sequence``: its cells serve other sequences at once."""
        self._api.llama_memory_seq_rm(self._memory, sequence, -1, -1)

    def vocabulary(self) -> tuple[bytes, ...]:
        """Every token's piece as the model's vocabulary writes it, by id (what a
        tokenizer loaded from the same file maps text to)."""
        api = self._api
        return tuple(
            api.llama_vocab_get_text(self._vocab, token) or b"" for token in range(self.n_vocab)
        )

    def clear_memory(self) -> None:
        """Drop every KV cell of every sequence (``llama_memory_clear``, data too)."""
        self._api.llama_memory_clear(self._memory, True)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens dropped), for stop strings."""
        if not ids:
            return ""
        array = (ctypes.c_int32 * len(ids))(*ids)
        size = max(64, 8 * len(ids))
        for _ in range(2):
            buffer = ctypes.create_string_buffer(size)
            written = self._api.llama_detokenize(
                self._vocab, array, len(ids), buffer, size, True, False
            )
            if written >= 0:
                return buffer.raw[:written].decode("utf-8", errors="replace")
            size = -written
        return ""

    def close(self) -> None:
        """Free the batch, the context and the model (safe to call twice)."""
        api = self._api
        if self._batch is not None:
            api.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            api.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            api.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> LlamaRuntime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
