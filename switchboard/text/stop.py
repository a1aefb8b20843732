"""Stop conditions of one request: stop strings found across token boundaries, stop token ids.

A :class:`StopChecker` sees the request's finalized text in pieces of any size and
releases text only once no stop string can still begin in it, so the released text is
the same however the text was split. The match is the first stop string to be
*completed* in the text (earliest end; of those ending together, the longest), which is
what a streaming reader sees first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["StopChecker", "StopScan"]


@dataclass(frozen=True, slots=True)
class StopScan:
    """Result of :meth:`StopChecker.push`: text safe to release, and the match if any."""

    #: Text to release now. After a match: the text up to the match, plus the matched
    #: string itself when ``no_stop_trim``.
    text: str
    #: The stop string that matched, or None.
    matched: str | None = None


class StopChecker:
    """Per-request stop strings and stop token ids.

    ``stop_strings`` are matched in the text (empty strings are ignored);
    ``stop_token_ids`` are matched in the token ids (the caller adds the EOS id unless the
    request ignores EOS). With ``no_stop_trim`` the matched string or token stays in the
    output. Feed text with :meth:`push` until it reports a match, then stop; when the
    request ends without one, :meth:`flush` releases the text held back.
    """

    def __init__(
        self,
        stop_strings: Iterable[str] = (),
        stop_token_ids: Iterable[int] = (),
        *,
        no_stop_trim: bool = False,
    ) -> None:
        self.stop_strings = tuple(dict.fromkeys(text for text in stop_strings if text))
        self.stop_token_ids = frozenset(stop_token_ids)
        self.no_stop_trim = no_stop_trim
        self._pending = ""

    @property
    def pending(self) -> str:
        """Text received but not released: a suffix that may begin a stop string."""
        return self._pending

    def first_stop_token(self, token_ids: Sequence[int]) -> int | None:
        """Index of the first stop token id in ``token_ids``, or None."""
        if self.stop_token_ids:
            for index, token_id in enumerate(token_ids):
                if token_id in self.stop_token_ids:
                    return index
        return None

    def push(self, text: str) -> StopScan:
        """Take the next piece of text; release what can no longer be part of a match.

        On a match the pending text is consumed and nothing after the match is released.
        """
        buffer = self._pending + text
        match = self._first_match(buffer)
        if match is not None:
            start, matched = match
            self._pending = ""
            end = start + len(matched) if self.no_stop_trim else start
            return StopScan(buffer[:end], matched)
        held = self._held_suffix_length(buffer)
        self._pending = buffer[len(buffer) - held :]
        return StopScan(buffer[: len(buffer) - held])

    def flush(self) -> str:
        """Release the held-back text (the request ended with no stop string)."""
        text, self._pending = self._pending, ""
        return text

    def _first_match(self, buffer: str) -> tuple[int, str] | None:
        """``(start, stop string)`` of the first stop string completed in ``buffer``."""
        best: tuple[int, int, str] | None = None
        for stop in self.stop_strings:
            start = buffer.find(stop)
            if start >= 0:
                candidate = (start + len(stop), start, stop)
                if best is None or candidate < best:
                    best = candidate
        return None if best is None else (best[1], best[2])

    def _held_suffix_length(self, buffer: str) -> int:
        """Length of the longest suffix of ``buffer`` that is a proper prefix of a stop string.

        Any later match must start inside that suffix, so everything before it is final.
        """
        longest = 0
        for stop in self.stop_strings:
            for length in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:length]):
                    longest = length
                    break
        return longest
