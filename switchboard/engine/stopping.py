"""When a generation ends: the stop rules every engine backend applies to a new token.

Pure: a function of the sequence's output so far, its limits, the model's end tokens and
a decode function. Checked in this order, each after ``min_new_tokens`` except the first:

1. ``{"type": "length", "length": max_new_tokens}`` once the sequence has that many tokens;
2. ``{"type": "stop", "matched": token_id}`` when the new token is one of the request's
   ``stop_token_ids``, or one of the model's end tokens (EOS, EOT, ...) unless
   ``ignore_eos``;
3. ``{"type": "stop", "matched": s}`` when stop string ``s`` appears in the decoded tail
   of the output (only with a ``decode`` function): the tail is the last ``n +
   STOP_TAIL_SLACK`` tokens, ``n`` the longest stop string's length in UTF-8 bytes,
   enough for any string that a token can complete, since every token of the text
   stands for at least one byte (a character split over several byte tokens included).
   Only a match that the new token completes counts: one already whole in the text
   before it was seen then, or passed over before ``min_new_tokens``.

The stop token counts in ``output_ids`` and ``completion_tokens``, as in SGLang; the
detokenizers drop it from the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from router_core.wire.finish import length_reason, stop_reason

__all__ = ["STOP_TAIL_SLACK", "finish_reason"]

#: Decoded tail tokens checked for stop strings, beyond the longest stop string's length.
STOP_TAIL_SLACK = 4


def finish_reason(
    output_ids: Sequence[int],
    *,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    stop_token_ids: frozenset[int] = frozenset(),
    end_token_ids: frozenset[int] = frozenset(),
    ignore_eos: bool = False,
    stop: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
) -> dict[str, Any] | None:
    """Why the sequence with ``output_ids`` (its newest token last) ends now, or None."""
    count = len(output_ids)
    if count >= max_new_tokens:
        return length_reason(max_new_tokens)
    if count == 0 or count < min_new_tokens:
        return None
    token = output_ids[-1]
    if token in stop_token_ids or (token in end_token_ids and not ignore_eos):
        return stop_reason(token)
    if stop and decode is not None:
        window = max(len(text.encode("utf-8", "surrogatepass")) for text in stop)
        window += STOP_TAIL_SLACK
        ids = list(output_ids[-window:])
        tail = decode(ids)
        # Only a match the new token completes: one wholly in the text before it was
        # seen earlier (or, before min_new_tokens, passed over), and the detokenizer
        # trims the match that ends the text.
        settled = _shared_prefix(decode(ids[:-1]), tail)
        for text in stop:
            found = tail.rfind(text)
            if found >= 0 and found + len(text) > settled:
                return stop_reason(text)
    return None


def _shared_prefix(first: str, second: str) -> int:
    """How many leading characters the two texts share."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    return min(len(first), len(second))
