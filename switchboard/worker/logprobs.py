"""Output logprobs: read off the engine's rows, shown in SGLang's and OpenAI's shapes.

An engine that lists ``logprobs`` in its load snapshot's ``features`` sends, in each
output row, the new tokens' logprobs (``output_token_logprobs_val``/``_idx``) and, when
the request asked for ``top_logprobs_num`` alternatives, theirs
(``output_top_logprobs_val``/``_idx``). :func:`row_logprobs` reads them into
:class:`TokenLogprob` s; the ``*_shape`` functions render them for each API. A token's
text is its own piece (:meth:`~switchboard.text.codec.TextCodec.token_piece`: a word's
leading space kept, special tokens included), which for a byte-level token that is part
of a character is U+FFFD; its ``bytes`` are that text's UTF-8.

Pure logic over a decode function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOGPROBS_FEATURE",
    "MAX_TOP_LOGPROBS",
    "TokenLogprob",
    "chat_shape",
    "completion_shape",
    "row_logprobs",
    "sglang_shape",
]

#: The feature an engine lists when it sends logprobs.
LOGPROBS_FEATURE = "logprobs"
#: Most alternatives a request may ask for per token (OpenAI's bound).
MAX_TOP_LOGPROBS = 20

#: A token's text, from its id.
Decode = Callable[[int], str]


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token, its logprob, and the top alternatives (id, logprob), best
    first, as many as were asked for."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


def _first(column: Sequence[Any] | None) -> Any:
    return column[0] if column else None


def row_logprobs(row: Any) -> list[TokenLogprob]:
    """The logprobs one output row (of one request) carries; empty when it has none."""
    values = _first(getattr(row, "output_token_logprobs_val", None))
    ids = _first(getattr(row, "output_token_logprobs_idx", None))
    if not values or not ids:
        return []
    top_values = _first(getattr(row, "output_top_logprobs_val", None)) or []
    top_ids = _first(getattr(row, "output_top_logprobs_idx", None)) or []
    found = []
    for position, (token_id, value) in enumerate(zip(ids, values, strict=False)):
        alternatives: tuple[tuple[int, float], ...] = ()
        if position < len(top_values) and position < len(top_ids):
            alternatives = tuple(zip(top_ids[position], top_values[position], strict=False))
        found.append(TokenLogprob(int(token_id), float(value), alternatives))
    return found


def sglang_shape(
    logprobs: Sequence[TokenLogprob], decode: Decode, *, with_text: bool, top: int
) -> dict[str, Any]:
    """SGLang's ``meta_info`` entries: ``output_token_logprobs`` as ``[logprob, id,
    text]`` (text None unless ``with_text``), and ``output_top_logprobs`` (one list per
    token) when ``top`` > 0."""

    def entry(token_id: int, value: float) -> list[Any]:
        return [value, token_id, decode(token_id) if with_text else None]

    shown: dict[str, Any] = {
        "output_token_logprobs": [entry(item.token_id, item.logprob) for item in logprobs]
    }
    if top > 0:
        shown["output_top_logprobs"] = [
            [entry(token_id, value) for token_id, value in item.top[:top]] for item in logprobs
        ]
    return shown


def completion_shape(
    logprobs: Sequence[TokenLogprob], decode: Decode, *, top: int, offset: int = 0
) -> dict[str, Any]:
    """OpenAI's legacy completion ``logprobs``: ``tokens``, ``token_logprobs``,
    ``top_logprobs`` (a token -> logprob map per position; None when ``top`` is 0) and
    ``text_offset`` (each token's start in the choice's text, from ``offset``)."""
    tokens = [decode(item.token_id) for item in logprobs]
    offsets, at = [], offset
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": [item.logprob for item in logprobs],
        "top_logprobs": (
            [{decode(token_id): value for token_id, value in item.top[:top]} for item in logprobs]
            if top > 0
            else None
        ),
        "text_offset": offsets,
    }


def _chat_token(text: str, value: float) -> dict[str, Any]:
    return {"token": text, "logprob": value, "bytes": list(text.encode("utf-8"))}


def chat_shape(logprobs: Sequence[TokenLogprob], decode: Decode, *, top: int) -> dict[str, Any]:
    """OpenAI's chat ``logprobs``: ``content``, one entry per token with its
    ``top_logprobs`` (``top`` of them), and ``refusal`` None."""
    content = []
    for item in logprobs:
        entry = _chat_token(decode(item.token_id), item.logprob)
        entry["top_logprobs"] = [
            _chat_token(decode(token_id), value) for token_id, value in item.top[:top]
        ]
        content.append(entry)
    return {"content": content, "refusal": None}
