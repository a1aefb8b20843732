"""Switchboard's built-in tokenizer as a GGUF vocabulary: nothing to fetch for the demo.

The built-in tokenizer (:mod:`switchboard.text.default_tokenizer`) is a byte-level BPE
with GPT-2's pre-tokenization and no normalizer, which is what llama.cpp's ``gpt2``
tokenizer model with the ``gpt-2`` pre-tokenizer does: the GGUF vocabulary is its
tokens in id order, its merges in rank order and its special tokens marked as control
tokens. A model built on it gives the same token ids as Switchboard's own tokenizer, so
a stack serving the model with the default tokenizer agrees with it token for token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGUFValueType, TokenType

from switchboard.models.vocab import TOKEN_LIST_KEY, MetadataEntry, VocabError, Vocabulary

__all__ = ["BuiltinVocab", "vocabulary_from_tokenizer_json"]


def _strings(key: str, values: Sequence[str]) -> MetadataEntry:
    encoded = [value.encode() for value in values]
    return MetadataEntry(key, encoded, GGUFValueType.ARRAY, GGUFValueType.STRING)


def _token_id(key: str, token_id: int) -> MetadataEntry:
    return MetadataEntry(key, token_id, GGUFValueType.UINT32)


def _merge_words(merges: Sequence[Any]) -> list[str]:
    """Merges as GGUF writes them, ``"left right"``; tokenizers writes either that or
    ``[left, right]``, depending on its version."""
    words = []
    for merge in merges:
        pair = merge.split(" ") if isinstance(merge, str) else list(merge)
        # Byte-level symbols never hold a space (it is written as "Ġ"): a pair that
        # does could not be split back apart by llama.cpp.
        if len(pair) != 2 or any(" " in part or not part for part in pair):
            raise VocabError(f"merge {merge!r} is not a pair of space-free symbols")
        words.append(f"{pair[0]} {pair[1]}")
    return words


def _token_types(count: int, added: Sequence[Mapping[str, Any]]) -> list[int]:
    types = [int(TokenType.NORMAL)] * count
    for token in added:
        kind = TokenType.CONTROL if token.get("special") else TokenType.USER_DEFINED
        types[int(token["id"])] = int(kind)
    return types


def vocabulary_from_tokenizer_json(
    text: str, *, eos: str = "<|endoftext|>", pad: str | None = "<|pad|>"
) -> Vocabulary:
    """A GGUF ``gpt2`` vocabulary from a byte-level BPE ``tokenizer.json``.

    ``eos`` (the EOS token) is also the BOS token (as in GPT-2), and neither is added to a
    prompt: Switchboard's tokenizer adds none either. ``pad`` is the padding
    token if the vocabulary has it. :class:`VocabError` for a tokenizer that is not a
    byte-level BPE with ids ``0 .. n-1``.
    """
    document = json.loads(text)
    model = document.get("model") or {}
    if model.get("type") != "BPE" or (document.get("pre_tokenizer") or {}).get("type") != (
        "ByteLevel"
    ):
        raise VocabError("not a byte-level BPE tokenizer")
    by_id = {int(token_id): token for token, token_id in model["vocab"].items()}
    added = document.get("added_tokens") or []
    for token in added:
        by_id.setdefault(int(token["id"]), token["content"])
    if sorted(by_id) != list(range(len(by_id))):
        raise VocabError("token ids are not 0 .. n-1 without gaps")
    tokens = [by_id[token_id] for token_id in range(len(by_id))]
    ids = {token: token_id for token_id, token in by_id.items()}
    if eos not in ids:
        raise VocabError(f"EOS token {eos!r} is not in the vocabulary")
    entries = [
        MetadataEntry("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING),
        # llama.cpp's name for GPT-2's pre-tokenizer regex, which ByteLevel applies.
        MetadataEntry("tokenizer.ggml.pre", "gpt-2", GGUFValueType.STRING),
        _strings(TOKEN_LIST_KEY, tokens),
        MetadataEntry(
            "tokenizer.ggml.token_type",
            _token_types(len(tokens), added),
            GGUFValueType.ARRAY,
            GGUFValueType.INT32,
        ),
        _strings("tokenizer.ggml.merges", _merge_words(model.get("merges") or [])),
        _token_id("tokenizer.ggml.bos_token_id", ids[eos]),
        _token_id("tokenizer.ggml.eos_token_id", ids[eos]),
    ]
    if pad is not None and pad in ids:
        entries.append(_token_id("tokenizer.ggml.padding_token_id", ids[pad]))
    entries.append(MetadataEntry("tokenizer.ggml.add_bos_token", False, GGUFValueType.BOOL))
    entries.append(MetadataEntry("tokenizer.ggml.add_eos_token", False, GGUFValueType.BOOL))
    return Vocabulary(tuple(entries))


@dataclass(frozen=True, slots=True)
class BuiltinVocab:
    """Switchboard's built-in tokenizer (trained on first use into ``cache_dir``, by
    default the tokenizer's own cache) as a GGUF vocabulary."""

    cache_dir: Path | None = None

    @property
    def name(self) -> str:
        """``builtin``."""
        return "builtin"

    def _tokenizer_json(self) -> str:
        from switchboard.text.default_tokenizer import ensure_default_tokenizer

        backend, _ = ensure_default_tokenizer(self.cache_dir)
        text: str = backend.to_str()
        return text

    def digest(self) -> str:
        """SHA-256 of the tokenizer's JSON (training is deterministic, and the JSON is
        exactly what decides the vocabulary)."""
        return hashlib.sha256(self._tokenizer_json().encode()).hexdigest()

    def load(self) -> Vocabulary:
        """The vocabulary of the built-in tokenizer."""
        return vocabulary_from_tokenizer_json(self._tokenizer_json())
