"""Tokenizers: load any ``tokenizer.json`` or GGUF model (``--tokenizer PATH``) or the
trained default.

:class:`Tokenizer` is a thin wrapper over a HF ``tokenizers.Tokenizer`` that gives the
rest of Switchboard the few things it needs (:class:`~switchboard.text.codec.TextCodec`):
``encode``, ``decode`` with the request's special-token options, the EOS id, the
vocabulary size and the special tokens. A GGUF path loads a
:class:`~switchboard.text.gguf_tokenizer.GgufTokenizer` instead.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import overload

import tokenizers

from switchboard.text.codec import TextCodec, TokenizerLoadError
from switchboard.text.default_tokenizer import ensure_default_tokenizer
from switchboard.text.gguf_file import is_gguf_file, load_gguf_tokenizer

__all__ = ["KNOWN_EOS_TOKENS", "Tokenizer", "TokenizerLoadError", "load_tokenizer"]

#: End-of-sequence tokens of common model families, tried in order when neither the
#: caller nor a ``tokenizer_config.json`` next to the file names one.
KNOWN_EOS_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<eos>")


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte: printable Latin-1 bytes stand for
    themselves, the other 68 bytes for the characters from U+0100 up, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet = {chr(byte): byte for byte in printable}
    others = [byte for byte in range(256) if byte not in set(printable)]
    alphabet.update({chr(0x100 + index): byte for index, byte in enumerate(others)})
    return alphabet


_BYTE_LEVEL = _byte_level_alphabet()
#: A byte-fallback token: ``<0x0A>``.
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")

#: What a tokenizer path may be, said whenever one cannot be loaded.
EXPECTED_PATH = "expected a tokenizer.json file, or a model directory holding one"


class Tokenizer:
    """Encode text to token ids and decode ids to text.

    ``source`` says where the tokenizer came from (a path, for logs and ``/health``).
    The EOS token is ``eos_token`` if given (it must be in the vocabulary), else the
    first of :data:`KNOWN_EOS_TOKENS` that is a special token, else there is none.
    """

    def __init__(
        self, backend: tokenizers.Tokenizer, *, source: str, eos_token: str | None = None
    ) -> None:
        self._backend = backend
        self._literal: tokenizers.Tokenizer | None = None
        self.source = source
        added = backend.get_added_tokens_decoder()
        #: Content -> id of every special added token (``<|endoftext|>``, ...).
        self.special_tokens: Mapping[str, int] = {
            token.content: token_id for token_id, token in sorted(added.items()) if token.special
        }
        self._special_ids = frozenset(self.special_tokens.values())
        self._added_ids = frozenset(added)
        self.eos_token_id = self._resolve_eos(eos_token)

    def _resolve_eos(self, eos_token: str | None) -> int | None:
        if eos_token is not None:
            token_id = self._backend.token_to_id(eos_token)
            if token_id is None:
                reason = f"EOS token {eos_token!r} is not in the vocabulary"
                raise TokenizerLoadError(self.source, reason)
            return token_id
        for candidate in KNOWN_EOS_TOKENS:
            if candidate in self.special_tokens:
                return self.special_tokens[candidate]
        return None

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The wrapped HF tokenizer."""
        return self._backend

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (every id is ``< vocab_size``)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The most characters one token can stand for (the longest vocabulary entry, at
        least 1): a text of ``n`` characters has at least ``n / max_token_chars`` tokens."""
        return max((len(token) for token in self._backend.get_vocab()), default=1) or 1

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the special tokens, the ones ``skip_special_tokens`` removes."""
        return self._special_ids

    def token_to_id(self, token: str) -> int | None:
        """The id of vocabulary entry ``token``, or None."""
        return self._backend.token_to_id(token)

    def encode(
        self, text: str, *, add_special_tokens: bool = True, parse_special: bool = True
    ) -> list[int]:
        """Token ids of ``text``.

        With ``parse_special`` (the HF default), special-token text in ``text``
        (``"<|endoftext|>"``) becomes the special token; without it, such text is encoded
        as the ordinary characters it is, which is how user-supplied prompts must be
        encoded so that a client cannot inject control tokens. ``add_special_tokens``
        applies the file's post-processor (a BOS token, for some models); the default
        tokenizer has none.
        """
        backend = self._backend if parse_special else self._literal_backend()
        return backend.encode(text, add_special_tokens=add_special_tokens).ids

    def _literal_backend(self) -> tokenizers.Tokenizer:
        """A copy of the backend that encodes special-token text literally (made once)."""
        if self._literal is None:
            literal = tokenizers.Tokenizer.from_str(self._backend.to_str())
            literal.encode_special_tokens = True
            self._literal = literal
        return self._literal

    def decode(
        self,
        ids: Sequence[int],
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = False,
    ) -> str:
        """Text of ``ids``.

        ``skip_special_tokens`` drops special tokens. ``spaces_between_special_tokens``
        puts one space between each kept added token and its neighbours, which is what
        ``transformers`` slow tokenizers do; the ``tokenizers`` library has no such
        option (and SGLang's fast-tokenizer path ignores it), so it is done here by
        decoding the runs between added tokens separately.
        """
        if not spaces_between_special_tokens or self._added_ids.isdisjoint(ids):
            return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return " ".join(self._sub_texts(ids, skip_special_tokens))

    def token_piece(self, token_id: int) -> str:
        """The id's text after an ordinary token, special tokens shown: what it adds to
        ``decode([anchor, id])`` beyond ``decode([anchor])``, so that a decoder that strips
        the first token's space (SentencePiece's Metaspace) keeps it. Decoded alone when
        no anchor exists or the two decodes do not line up."""
        alone = self.decode([token_id], skip_special_tokens=False)
        anchor = self._anchor
        if anchor is None:
            return alone
        head = self.decode([anchor], skip_special_tokens=False)
        both = self.decode([anchor, token_id], skip_special_tokens=False)
        return both[len(head) :] if both.startswith(head) and len(both) > len(head) else alone

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one id adds to a text: an added token's content; a byte-level
        (GPT-2) token's bytes; a byte-fallback ``<0xNN>`` token's byte; otherwise the
        UTF-8 of :meth:`token_piece`. "" for an id outside the vocabulary."""
        token = self._backend.id_to_token(token_id)
        if token is None:
            return b""
        if token_id in self._added_ids:
            return token.encode()
        kinds = self._decoder_kinds
        if "ByteFallback" in kinds and _BYTE_TOKEN.fullmatch(token):
            return bytes([int(token[3:5], 16)])
        if "ByteLevel" in kinds and all(char in _BYTE_LEVEL for char in token):
            return bytes(_BYTE_LEVEL[char] for char in token)
        return self.token_piece(token_id).encode()

    @functools.cached_property
    def _decoder_kinds(self) -> frozenset[str]:
        """The types of the backend's decoder, a ``Sequence``'s parts included."""
        decoder = json.loads(self._backend.to_str()).get("decoder") or {}
        parts = [decoder, *decoder.get("decoders", ())]
        return frozenset(str(part.get("type")) for part in parts)

    @functools.cached_property
    def _anchor(self) -> int | None:
        """An ordinary (not special) token whose text is one ASCII letter, if any."""
        for text in ("a", "▁a", "Ġa", "x", "▁x"):
            token_id = self._backend.token_to_id(text)
            if token_id is not None and token_id not in self._special_ids:
                return token_id
        return None

    def _sub_texts(self, ids: Iterable[int], skip_special_tokens: bool) -> list[str]:
        """Decoded runs of ordinary tokens and the kept added tokens, in order."""
        parts: list[str] = []
        run: list[int] = []
        for token_id in ids:
            if token_id not in self._added_ids:
                run.append(token_id)
            elif not (skip_special_tokens and token_id in self._special_ids):
                if run:
                    parts.append(self._backend.decode(run))
                    run = []
                parts.append(self._backend.id_to_token(token_id) or "")
        if run:
            parts.append(self._backend.decode(run))
        return parts


def _config_eos_token(tokenizer_file: Path) -> str | None:
    """``eos_token`` of a ``tokenizer_config.json`` beside ``tokenizer_file``, if any."""
    config_file = tokenizer_file.with_name("tokenizer_config.json")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    eos = config.get("eos_token") if isinstance(config, dict) else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    return eos if isinstance(eos, str) else None


@overload
def load_tokenizer(
    path: None = None, *, cache_dir: Path | None = None, eos_token: str | None = None
) -> Tokenizer: ...


@overload
def load_tokenizer(
    path: str | os.PathLike[str], *, cache_dir: Path | None = None, eos_token: str | None = None
) -> TextCodec: ...


def load_tokenizer(
    path: str | os.PathLike[str] | None = None,
    *,
    cache_dir: Path | None = None,
    eos_token: str | None = None,
) -> TextCodec:
    """Load the tokenizer at ``path``, or the default one when ``path`` is None.

    ``path`` is a ``tokenizer.json`` or a directory holding one (a HF model directory);
    the EOS token is ``eos_token``, else the ``eos_token`` of a ``tokenizer_config.json``
    beside the file, else a well-known one. A path ending in ``.gguf``, or a file that
    starts with the GGUF magic, is a GGUF model whose own vocabulary llama.cpp loads
    (:func:`~switchboard.text.gguf_file.load_gguf_tokenizer`; it needs the
    ``llama`` extra). Raises :class:`TokenizerLoadError` naming the path when it is
    missing, unreadable or not a tokenizer. The default (see
    :mod:`switchboard.text.default_tokenizer`) is cached under ``cache_dir``.
    """
    if path is None:
        backend, source = ensure_default_tokenizer(cache_dir)
        return Tokenizer(backend, source=source, eos_token=eos_token)
    given = os.fspath(path)
    if given.lower().endswith(".gguf") or is_gguf_file(path):
        return load_gguf_tokenizer(path, eos_token=eos_token)
    tokenizer_file = Path(path)
    if tokenizer_file.is_dir():
        tokenizer_file = tokenizer_file / "tokenizer.json"
    try:
        text = tokenizer_file.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        if tokenizer_file != Path(path):
            reason = f"the directory holds no tokenizer.json ({EXPECTED_PATH})"
        else:
            reason = f"not found ({EXPECTED_PATH})"
        raise TokenizerLoadError(given, reason) from error
    except (OSError, UnicodeDecodeError) as error:
        raise TokenizerLoadError(given, f"cannot read {tokenizer_file}: {error}") from error
    try:
        backend = tokenizers.Tokenizer.from_str(text)
    # The library reports every parse failure as a bare Exception.
    except Exception as error:
        reason = f"{tokenizer_file} is not a valid tokenizer.json: {error}"
        raise TokenizerLoadError(given, reason) from error
    eos = eos_token if eos_token is not None else _config_eos_token(tokenizer_file)
    return Tokenizer(backend, source=str(tokenizer_file), eos_token=eos)
