"""Where a generated model's tokenizer comes from: a vocabulary source.

A :class:`VocabSource` names itself, says what identifies its content (its digest, part
of the model's cache key) and loads a :class:`Vocabulary`: the ``tokenizer.*`` metadata
entries the model file carries, with their GGUF types. :class:`GGUFVocab` copies them
from a GGUF file (llama.cpp's ``ggml-vocab-*.gguf``, or any model);
:class:`~switchboard.models.builtin_vocab.BuiltinVocab` makes them from Switchboard's
own tokenizer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gguf import GGUFReader, GGUFValueType
from gguf.gguf_reader import ReaderField

__all__ = [
    "TOKEN_LIST_KEY",
    "GGUFVocab",
    "MetadataEntry",
    "MetadataValue",
    "Scalar",
    "VocabError",
    "VocabSource",
    "Vocabulary",
    "file_digest",
]

#: The key holding the tokens, whose length is the vocabulary size.
TOKEN_LIST_KEY = "tokenizer.ggml.tokens"  # noqa: S105 (a metadata key, not a secret)

#: The keys :class:`GGUFVocab` copies: every ``tokenizer.ggml.*`` and the chat template.
_COPIED = re.compile(r"tokenizer\.ggml\..+|tokenizer\.chat_template")

#: One value as decoded (GGUF strings as bytes, when read from a file).
Scalar = bool | int | float | str | bytes
#: What a GGUF metadata entry holds: a scalar or an array of them.
MetadataValue = Scalar | Sequence[Scalar]


class VocabError(ValueError):
    """A vocabulary source cannot give a vocabulary: ``<source>: <reason>``."""


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One GGUF metadata key and value, typed as the file stores it.

    ``sub_type`` is the element type of an array (``type`` is then ``ARRAY``). Strings
    are kept as the file's bytes, so tokens that are not valid UTF-8 copy unchanged.
    """

    key: str
    value: MetadataValue
    type: GGUFValueType
    sub_type: GGUFValueType | None = None


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """A tokenizer as GGUF metadata: the entries to write, in order."""

    entries: tuple[MetadataEntry, ...]

    def __post_init__(self) -> None:
        tokens = self.find(TOKEN_LIST_KEY)
        if tokens is None or not isinstance(tokens.value, list | tuple) or not tokens.value:
            raise VocabError(f"a vocabulary needs a non-empty {TOKEN_LIST_KEY}")

    def find(self, key: str) -> MetadataEntry | None:
        """The entry of ``key``, or None."""
        return next((entry for entry in self.entries if entry.key == key), None)

    @property
    def size(self) -> int:
        """Number of tokens (the model's ``llama.vocab_size``)."""
        tokens = self.find(TOKEN_LIST_KEY)
        assert tokens is not None and isinstance(tokens.value, list | tuple)  # __post_init__
        return len(tokens.value)


class VocabSource(Protocol):
    """Something a vocabulary can be made from."""

    @property
    def name(self) -> str:
        """Short name for file names (``llama-spm``, ``builtin``)."""
        ...

    def digest(self) -> str:
        """Hex SHA-256 identifying what :meth:`load` returns (cheaper than loading)."""
        ...

    def load(self) -> Vocabulary:
        """The vocabulary; :class:`VocabError` if the source cannot give one."""
        ...


def file_digest(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _element(field: ReaderField, part: int, kind: GGUFValueType) -> Scalar:
    array = field.parts[part]
    if kind == GGUFValueType.STRING:
        return bytes(array)
    value: Scalar = array[0].item()
    return value


def _entry(field: ReaderField) -> MetadataEntry:
    """A reader field as an entry: the reader's parts hold raw numpy views."""
    kind = field.types[0]
    if kind != GGUFValueType.ARRAY:
        return MetadataEntry(field.name, _element(field, field.data[0], kind), kind)
    if len(field.types) != 2:
        raise VocabError(f"{field.name}: nested arrays are not supported")
    sub_type = field.types[1]
    values = [_element(field, part, sub_type) for part in field.data]
    return MetadataEntry(field.name, values, kind, sub_type)


@dataclass(frozen=True, slots=True)
class GGUFVocab:
    """The tokenizer of a GGUF file: every ``tokenizer.ggml.*`` key and
    ``tokenizer.chat_template`` if present, copied with their types."""

    path: Path

    @property
    def name(self) -> str:
        """The file's stem without llama.cpp's ``ggml-vocab-`` prefix (``llama-spm``)."""
        stem = self.path.name.removesuffix(".gguf").removeprefix("ggml-vocab-")
        return re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-") or "vocab"

    def digest(self) -> str:
        """SHA-256 of the file; :class:`VocabError` if it cannot be read."""
        try:
            return file_digest(self.path)
        except OSError as exc:
            raise VocabError(f"{self.path}: {exc.strerror or exc}") from exc

    def load(self) -> Vocabulary:
        """The file's tokenizer entries; :class:`VocabError` if it is not a GGUF file
        or holds no tokens."""
        try:
            reader = GGUFReader(self.path)
        except OSError as exc:
            raise VocabError(f"{self.path}: {exc.strerror or exc}") from exc
        # The reader reports a file that is not GGUF (bad magic, truncated) as one of these.
        except (ValueError, IndexError, KeyError) as exc:
            raise VocabError(f"{self.path}: not a GGUF file ({exc})") from exc
        entries = tuple(
            _entry(field) for key, field in reader.fields.items() if _COPIED.fullmatch(key)
        )
        try:
            return Vocabulary(entries)
        except VocabError as exc:
            raise VocabError(f"{self.path}: {exc}") from exc
