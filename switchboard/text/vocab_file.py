"""The vocabulary file: the workers' token ids as bytes, for engines in any language.

An engine must end a generation on a stop string or the end-of-sequence token, so it
must know what text its ids stand for, in the workers' vocabulary. The built-in
tokenizer is trained at first start into a cache an outsider cannot name, and a GGUF
vocabulary needs llama.cpp to read; this file says it plainly, as one MessagePack map
(format :data:`FORMAT`, described in ``docs/protocol.md``, "The vocabulary file"):

``format``, ``source``, ``vocab_size``, ``eos_token_id`` (or nil), ``eog_token_ids``,
``special_token_ids``, ``strip_leading_space`` and ``tokens``, where ``tokens[i]`` is
the bytes id ``i`` adds to a text. :func:`decode_ids` is the documented decoding rule,
which the tests hold to the tokenizer's own decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from router_core.atomic_file import write_atomic
from switchboard.text.codec import TextCodec

__all__ = ["FORMAT", "VocabFile", "decode_ids", "read_vocab_file", "vocab_file", "write_vocab_file"]

FORMAT: Final = "switchboard-vocab/1"


class VocabFile(msgspec.Struct, kw_only=True):
    """The file's one map."""

    format: str
    source: str
    vocab_size: int
    eos_token_id: int | None
    eog_token_ids: list[int]
    special_token_ids: list[int]
    #: A decode from the start of a text drops the first token's leading space
    #: (SentencePiece's rule); the bytes in ``tokens`` keep it.
    strip_leading_space: bool
    tokens: list[bytes]


def _strips_leading_space(codec: TextCodec, tokens: Sequence[bytes]) -> bool:
    """Whether decoding one space-led token alone loses its space (the first such
    ordinary token whose text is plain ASCII decides)."""
    for token_id, data in enumerate(tokens):
        if (
            len(data) > 1
            and data.startswith(b" ")
            and data[1:2] != b" "
            and data.isascii()
            and token_id not in codec.special_token_ids
        ):
            return codec.decode([token_id], skip_special_tokens=False) == data[1:].decode()
    return False


def vocab_file(codec: TextCodec) -> VocabFile:
    """The vocabulary file of ``codec``."""
    tokens = [codec.token_bytes(token_id) for token_id in range(codec.vocab_size)]
    eog = getattr(codec, "eog_token_ids", None)
    eos = codec.eos_token_id
    end_ids = set(eog) if eog is not None else set()
    if eos is not None:
        end_ids.add(eos)
    return VocabFile(
        format=FORMAT,
        source=codec.source,
        vocab_size=codec.vocab_size,
        eos_token_id=eos,
        eog_token_ids=sorted(end_ids),
        special_token_ids=sorted(codec.special_token_ids),
        strip_leading_space=_strips_leading_space(codec, tokens),
        tokens=tokens,
    )


def write_vocab_file(codec: TextCodec, path: Path) -> None:
    """Write ``codec``'s vocabulary file to ``path`` atomically (mode 0600); OSError."""
    write_atomic(path, msgspec.msgpack.encode(vocab_file(codec)))


def read_vocab_file(path: Path) -> VocabFile:
    """The vocabulary file at ``path``; OSError, or ValueError if it is not one."""
    try:
        vocab = msgspec.msgpack.decode(path.read_bytes(), type=VocabFile)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{path}: not a vocabulary file: {exc}") from exc
    if vocab.format != FORMAT:
        raise ValueError(f"{path}: format {vocab.format!r}, expected {FORMAT!r}")
    if len(vocab.tokens) != vocab.vocab_size:
        raise ValueError(f"{path}: {len(vocab.tokens)} tokens for vocab_size {vocab.vocab_size}")
    return vocab


def decode_ids(
    vocab: VocabFile, ids: Sequence[int], *, skip_special_tokens: bool = True, at_start: bool = True
) -> str:
    """The text of ``ids`` by the file's rule: their bytes joined (special ids left out
    with ``skip_special_tokens``, ids outside the vocabulary ignored), decoded as UTF-8
    with U+FFFD for what is not a whole character, one leading space dropped when
    ``at_start`` and the file says ``strip_leading_space``."""
    special = frozenset(vocab.special_token_ids) if skip_special_tokens else frozenset()
    data = b"".join(
        vocab.tokens[token_id]
        for token_id in ids
        if 0 <= token_id < vocab.vocab_size and token_id not in special
    )
    if at_start and vocab.strip_leading_space and data.startswith(b" "):
        data = data[1:]
    return data.decode("utf-8", errors="replace")
