"""What the rest of Switchboard needs from a tokenizer: :class:`TextCodec`, and the
:class:`TokenizerLoadError` every kind of tokenizer raises when it cannot be loaded.

Workers, detokenizers, preflight and the simulated engine are typed against this
protocol, so a HF ``tokenizer.json`` (:class:`~switchboard.text.tokenizer.Tokenizer`)
and a GGUF model's own vocabulary
(:class:`~switchboard.text.gguf_tokenizer.GgufTokenizer`) serve them alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = ["TextCodec", "TokenizerLoadError"]


class TextCodec(Protocol):
    """Text to token ids and back, with the vocabulary facts callers check ids against."""

    @property
    def source(self) -> str:
        """Where the tokenizer came from (a path), for logs and ``/health``."""
        ...

    @property
    def vocab_size(self) -> int:
        """Number of ids: every id is ``< vocab_size``."""
        ...

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Text -> id of each special token."""
        ...

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the special tokens: what ``skip_special_tokens`` drops and
        ``parse_special=False`` never produces from text."""
        ...

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-sequence id, if the vocabulary has one."""
        ...

    @property
    def max_token_chars(self) -> int:
        """At least 1, and a text of ``n`` characters encodes to at least
        ``n / max_token_chars`` tokens (for a cheap too-long check before encoding)."""
        ...

    def token_to_id(self, token: str) -> int | None:
        """The id of vocabulary entry ``token`` (as the vocabulary spells it), or None."""
        ...

    def encode(
        self, text: str, *, add_special_tokens: bool = True, parse_special: bool = True
    ) -> list[int]:
        """Token ids of ``text``; ``parse_special=False`` encodes special-token text as
        plain characters, ``add_special_tokens`` adds what the vocabulary adds (BOS...)."""
        ...

    def decode(
        self,
        ids: Sequence[int],
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = False,
    ) -> str:
        """Text of ``ids``, a whole-sequence decode; bytes that are not (yet) a whole
        UTF-8 character come out as U+FFFD."""
        ...

    def token_piece(self, token_id: int) -> str:
        """One id's own text as a server shows it in logprobs: special tokens rendered,
        a word piece's leading space kept (which a decode from the start of a text may
        drop); bytes short of a UTF-8 character come out as U+FFFD."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one id adds to a text after an ordinary token (a word piece's
        leading space kept, special tokens rendered): what the vocabulary file lists,
        so that an engine in any language can decode its own ids."""
        ...


class TokenizerLoadError(Exception):
    """A tokenizer could not be loaded: ``tokenizer <path>: <reason>``.

    ``path`` is the path as given, ``reason`` what is wrong with it, so that a caller
    naming the setting itself (``stack.toml: tokenizer = "..."``) can add the reason.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"tokenizer {path}: {reason}")
        self.path = path
        self.reason = reason
