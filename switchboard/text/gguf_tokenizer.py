"""A GGUF model's own tokenizer, run by llama.cpp: ``--tokenizer model.gguf``.

:func:`~switchboard.text.gguf_file.load_gguf_tokenizer` loads only the vocabulary of a
GGUF file (llama.cpp's ``vocab_only``: no weights, a fraction of a second) and
:class:`GgufTokenizer` encodes and decodes with llama.cpp's ``llama_tokenize`` and
``llama_detokenize``, so the ids a worker sends are the ids llama.cpp itself makes of
the text, by construction.

llama.cpp's rules, which this class keeps rather than smooths over:

* ``add_special_tokens`` is llama.cpp's ``add_special``: BOS and EOS as the vocabulary's
  ``add_bos``/``add_eos`` say (CLS/SEP for WordPiece vocabularies).
* A SentencePiece vocabulary prefixes the text with a space when encoding, and a decode
  removes the first token's leading space, unless a control token (BOS) comes first:
  ``decode(encode("Hi"))`` is ``" Hi"`` with BOS and ``"Hi"`` without it.
* Some vocabularies clean up spaces when decoding (``" ,"`` becomes ``","``, as HF's
  ``clean_up_tokenization_spaces`` does); WordPiece vocabularies lowercase and drop
  whitespace. Such a decode is not the encoded text.
* The special tokens are those whose attribute is control or unknown: exactly the tokens
  that only ``parse_special`` matches in text, and that a decode without
  ``unparse_special`` renders as nothing. User-defined tokens are text: llama.cpp
  matches them in any text and always renders them.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from switchboard.text.codec import TokenizerLoadError

__all__ = ["VOCAB_TYPES", "GgufTokenizer"]

#: llama.cpp's "no such token" (``LLAMA_TOKEN_NULL``).
_NO_TOKEN = -1
#: ``enum llama_token_attr`` bits.
_ATTR_UNKNOWN, _ATTR_CONTROL, _ATTR_USER_DEFINED = 1 << 0, 1 << 3, 1 << 4
#: What a decode without ``unparse_special`` drops (llama-vocab.cpp ``token_to_piece``).
_ATTR_SPECIAL = _ATTR_UNKNOWN | _ATTR_CONTROL
#: What llama.cpp matches as a whole before tokenizing (its special tokens cache).
_ATTR_ADDED = _ATTR_SPECIAL | _ATTR_USER_DEFINED
#: ``enum llama_vocab_type`` by name; 0 (none) is refused at load.
VOCAB_TYPES = {1: "spm", 2: "bpe", 3: "wpm", 4: "ugm", 5: "rwkv", 6: "plamo2", 7: "test"}
#: Vocabulary types whose encoding keeps every character of the text (WordPiece and
#: Unigram normalizers drop whitespace and more, so a token can stand for any number).
_KEEPS_EVERY_CHARACTER = frozenset({"spm", "bpe", "rwkv"})
#: Buffer sizes are int32_t in llama.cpp's API.
_INT32_MAX = 2**31 - 1


class GgufTokenizer:
    """Encode and decode with the vocabulary of one llama.cpp model (vocabulary only).

    Satisfies :class:`~switchboard.text.codec.TextCodec`. It owns the llama.cpp model:
    :meth:`close` (or the context manager, or garbage collection) frees it, after which
    every call raises ``RuntimeError``; do not close it while another thread encodes.
    ``eos_token``, if given, names the EOS token (it must be in the vocabulary);
    otherwise the EOS is llama.cpp's EOS, else its EOT, else there is none.
    """

    def __init__(
        self, api: ModuleType, model: Any, *, source: str, eos_token: str | None = None
    ) -> None:
        self._api = api
        self._closer = weakref.finalize(self, api.llama_model_free, model)
        self._vocab: Any = api.llama_model_get_vocab(model)
        #: Where the vocabulary came from (the GGUF path).
        self.source = source
        kind = VOCAB_TYPES.get(api.llama_vocab_type(self._vocab))
        if kind is None:
            self.close()
            raise TokenizerLoadError(source, "the GGUF file holds no tokenizer vocabulary")
        #: llama.cpp's vocabulary type: spm, bpe, wpm, ugm, rwkv, plamo2 or test.
        self.vocab_type = kind
        self._vocab_size = int(api.llama_vocab_n_tokens(self._vocab))
        #: The BOS id, if the vocabulary has one, and whether encoding adds it.
        self.bos_token_id = self._token_or_none(api.llama_vocab_bos(self._vocab))
        self.add_bos = bool(api.llama_vocab_get_add_bos(self._vocab))
        self.add_eos = bool(api.llama_vocab_get_add_eos(self._vocab))
        template = api.llama_model_chat_template(model, None)
        #: The ``tokenizer.chat_template`` metadata (a Jinja template), if present.
        self.chat_template: str | None = (
            template.decode("utf-8", errors="replace") if template else None
        )
        self.eos_token_id = self._resolve_eos(eos_token)

    def _token_or_none(self, token_id: int) -> int | None:
        return None if token_id == _NO_TOKEN else int(token_id)

    def _resolve_eos(self, eos_token: str | None) -> int | None:
        if eos_token is not None:
            token_id = self.token_to_id(eos_token)
            if token_id is None:
                self.close()
                reason = f"EOS token {eos_token!r} is not in the vocabulary"
                raise TokenizerLoadError(self.source, reason)
            return token_id
        eos = self._token_or_none(self._api.llama_vocab_eos(self._vocab))
        if eos is not None:
            return eos
        return self._token_or_none(self._api.llama_vocab_eot(self._vocab))

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Free the llama.cpp model (once; later calls do nothing)."""
        self._closer()

    @property
    def closed(self) -> bool:
        """True once the model has been freed."""
        return not self._closer.alive

    def __enter__(self) -> GgufTokenizer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def llama_vocab(self) -> Any:
        """llama.cpp's ``llama_vocab *`` of this tokenizer, for calling llama.cpp directly
        (valid until :meth:`close`)."""
        return self._live_vocab()

    def _live_vocab(self) -> Any:
        if not self._closer.alive:
            raise RuntimeError(f"GGUF tokenizer {self.source} is closed")
        return self._vocab

    # ------------------------------------------------------------------ vocabulary

    @property
    def vocab_size(self) -> int:
        """Number of ids (every id is ``< vocab_size``)."""
        return self._vocab_size

    @functools.cached_property
    def _attributes(self) -> tuple[int, ...]:
        """``llama_token_attr`` of every id."""
        vocab, attr = self._live_vocab(), self._api.llama_vocab_get_attr
        return tuple(int(attr(vocab, token_id)) for token_id in range(self._vocab_size))

    def _ids_with(self, bits: int) -> frozenset[int]:
        return frozenset(i for i, attr in enumerate(self._attributes) if attr & bits)

    @functools.cached_property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the control and unknown tokens: what ``skip_special_tokens`` drops."""
        return self._ids_with(_ATTR_SPECIAL)

    @functools.cached_property
    def _added_ids(self) -> frozenset[int]:
        return self._ids_with(_ATTR_ADDED)

    @functools.cached_property
    def special_tokens(self) -> Mapping[str, int]:
        """Text -> id of each special token (the lowest id when two share a text)."""
        texts: dict[str, int] = {}
        for token_id in sorted(self.special_token_ids):
            texts.setdefault(self._text(token_id), token_id)
        return texts

    @functools.cached_property
    def eog_token_ids(self) -> frozenset[int]:
        """Ids that end generation for llama.cpp (``llama_vocab_is_eog``: EOS, EOT...)."""
        vocab, is_eog = self._live_vocab(), self._api.llama_vocab_is_eog
        return frozenset(i for i in range(self._vocab_size) if is_eog(vocab, i))

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The longest token's text in characters (at least 1). For WordPiece and Unigram
        vocabularies, whose normalizers drop characters, there is no such bound and
        this is ``sys.maxsize``."""
        if self.vocab_type not in _KEEPS_EVERY_CHARACTER:
            return sys.maxsize
        api, vocab = self._api, self._live_vocab()
        # One reused buffer: this runs over every id when a worker starts.
        room = 256
        buffer = ctypes.create_string_buffer(room)
        longest = 1
        for token_id in range(self._vocab_size):
            count = int(api.llama_token_to_piece(vocab, token_id, buffer, room, 0, True))
            if count < 0:
                room = -count
                buffer = ctypes.create_string_buffer(room)
                count = int(api.llama_token_to_piece(vocab, token_id, buffer, room, 0, True))
            # Bytes are at least characters: decode only pieces that could be the longest.
            if count > longest:
                piece = buffer.raw[:count].decode("utf-8", errors="replace")
                longest = max(longest, len(piece))
        return longest

    @functools.cached_property
    def _ids_by_text(self) -> Mapping[str, int]:
        texts: dict[str, int] = {}
        for token_id in range(self._vocab_size):
            texts.setdefault(self._text(token_id), token_id)
        return texts

    def token_to_id(self, token: str) -> int | None:
        """The id of vocabulary entry ``token`` as the GGUF spells it (``"▁Hello"``,
        ``"Ġworld"``, ``"<|im_end|>"``), or None."""
        return self._ids_by_text.get(token)

    def _text(self, token_id: int) -> str:
        text: bytes = self._api.llama_vocab_get_text(self._live_vocab(), token_id)
        return text.decode("utf-8", errors="replace")

    def token_piece(self, token_id: int) -> str:
        """``llama_token_to_piece(id, lstrip=0, special=True)``: the id's text as
        llama.cpp's server shows it in logprobs, a SentencePiece ``▁Paris`` as
        ``" Paris"``; "" for an id outside the vocabulary."""
        return self.token_bytes(token_id).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes of :meth:`token_piece` (a byte token ``<0xE2>`` is one byte)."""
        if not 0 <= token_id < self._vocab_size:
            return b""
        api, vocab = self._api, self._live_vocab()
        room = 64
        for _attempt in range(2):
            piece = ctypes.create_string_buffer(room)
            count = int(api.llama_token_to_piece(vocab, token_id, piece, room, 0, True))
            if count >= 0:
                return piece.raw[:count]
            room = -count
        raise ValueError(f"llama.cpp could not render token {token_id}")

    def _piece(self, token_id: int) -> str:
        piece = self._detokenize([token_id], unparse_special=True)
        return piece.decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ encode/decode

    def encode(
        self, text: str, *, add_special_tokens: bool = True, parse_special: bool = True
    ) -> list[int]:
        """``llama_tokenize(text, add_special, parse_special)``.

        Without ``parse_special`` (how user prompts are encoded) control-token text
        such as ``"<|im_end|>"`` is encoded as the characters it is, so a client cannot
        inject control tokens. Raises ``UnicodeEncodeError`` for text that is not valid
        Unicode (a lone surrogate) and ``ValueError`` for text beyond llama.cpp's limits.
        """
        data = text.encode("utf-8")
        if len(data) + 4 > _INT32_MAX:
            raise ValueError(f"text of {len(data)} bytes is too long for llama.cpp")
        api, vocab = self._api, self._live_vocab()
        # The prefix space, BOS and EOS (or CLS and SEP) come on top of one id per byte.
        room = len(data) + 4
        for _attempt in range(2):
            tokens = (api.llama_token * room)()
            count = int(
                api.llama_tokenize(
                    vocab, data, len(data), tokens, room, add_special_tokens, parse_special
                )
            )
            if count >= 0:
                return list(tokens[:count])
            room = -count
        raise ValueError(f"llama.cpp could not tokenize a text of {len(data)} bytes")

    def decode(
        self,
        ids: Sequence[int],
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = False,
    ) -> str:
        """``llama_detokenize(ids, remove_special=False, unparse_special=not skip)``.

        ``skip_special_tokens`` drops the control and unknown tokens (BOS, EOS, EOT,
        ``<|im_end|>``...); user-defined tokens are always text. ``remove_special`` stays
        off: it only drops a leading BOS and a trailing EOS, which skipping drops
        anyway, and keeping them is what not skipping means. The decode is llama.cpp's
        whole-sequence one (SentencePiece's first-space rule, space clean-up); ids
        outside the vocabulary are ignored; bytes that are not a whole UTF-8 character
        become U+FFFD. ``spaces_between_special_tokens`` puts one space between each
        kept added (control, unknown or user-defined) token and its neighbours.
        """
        known = [int(i) for i in ids if 0 <= i < self._vocab_size]
        if spaces_between_special_tokens and not self._added_ids.isdisjoint(known):
            return " ".join(self._sub_texts(known, skip_special_tokens))
        text = self._detokenize(known, unparse_special=not skip_special_tokens)
        return text.decode("utf-8", errors="replace")

    def _sub_texts(self, ids: Iterable[int], skip_special_tokens: bool) -> list[str]:
        """Decoded runs of ordinary tokens, and the kept added tokens, in order. A skipped
        token stays in its run, so the run decodes as llama.cpp decodes it."""
        parts: list[str] = []
        run: list[int] = []
        for token_id in ids:
            skipped = skip_special_tokens and token_id in self.special_token_ids
            if token_id not in self._added_ids or skipped:
                run.append(token_id)
                continue
            if run:
                parts.append(self.decode(run, skip_special_tokens=skip_special_tokens))
                run = []
            parts.append(self._piece(token_id))
        if run:
            parts.append(self.decode(run, skip_special_tokens=skip_special_tokens))
        return parts

    def _detokenize(self, ids: Sequence[int], *, unparse_special: bool) -> bytes:
        """The bytes ``llama_detokenize`` makes of ``ids`` (all inside the vocabulary)."""
        if not ids:
            return b""
        api, vocab = self._api, self._live_vocab()
        tokens = (api.llama_token * len(ids))(*ids)
        room = 8 * len(ids) + 64
        for _attempt in range(2):
            text = ctypes.create_string_buffer(room)
            count = int(
                api.llama_detokenize(vocab, tokens, len(ids), text, room, False, unparse_special)
            )
            if count >= 0:
                return text.raw[:count]
            room = -count
        raise ValueError(f"llama.cpp could not detokenize {len(ids)} ids")
