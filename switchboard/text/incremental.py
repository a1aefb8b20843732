"""Incremental detokenization of one request: token ids in, finalized text out.

The algorithm is the prefix/read-offset window of vLLM and SGLang. Two offsets index the
request's output ids: ``read_offset`` is where text has been produced up to, and
``prefix_offset`` (at most ``read_offset``) starts a window of already-decoded tokens
kept as context. Each step decodes ``ids[prefix_offset:read_offset]`` and
``ids[prefix_offset:]`` and emits the difference. Decoding a window rather than the new
ids alone keeps decoders that treat the first token specially (SentencePiece's leading
space) and merges across the boundary correct; decoding a window rather than everything
keeps each step's cost bounded.

If the new text ends in U+FFFD, the last token ended inside a multi-byte UTF-8
character (a byte-level token can hold half of an emoji); nothing is emitted and the
offsets stay put, so the next step decodes the completed character. Only
:meth:`IncrementalDetokenizer.finish` emits such a tail, since by then it is final.
Emitted text then passes through a :class:`~switchboard.text.stop.StopChecker`.

**Context.** Output continues a prompt, and a decoder may treat the first token of a
decode specially: llama.cpp drops a SentencePiece token's leading space at the start of
a text, so ``"▁Paris"`` decoded alone is ``"Paris"`` where the model wrote ``" Paris"``.
Given the prompt's last ids as ``context_ids``, the window starts inside the prompt and
the first output token is decoded where it stands, as llama.cpp's server and SGLang do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from switchboard.text.codec import TextCodec
from switchboard.text.stop import StopChecker

__all__ = ["REPLACEMENT_CHARACTER", "IncrementalDetokenizer", "TextDelta"]

#: What a decoder yields for bytes that are not (yet) a whole UTF-8 character.
REPLACEMENT_CHARACTER = "\ufffd"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """New text of one step, and whether (and why) the request's text is complete."""

    text: str
    #: True once a stop string or stop token matched, or :meth:`finish` was called.
    finished: bool = False
    #: The stop string or stop token id that ended the request, if one did.
    matched_stop: str | int | None = None


class IncrementalDetokenizer:
    """Turn one request's output token ids into text, a step at a time.

    Contract: the concatenation of every ``feed(...).text`` and ``finish().text`` equals
    ``tokenizer.decode(ids, ...)`` of all ids fed (with the same options) when no stop
    condition matched; a piece never ends in an incomplete UTF-8 character. With stop
    conditions the output is that text cut at the first stop (see
    :class:`~switchboard.text.stop.StopChecker`) and ids after a stop are ignored.

    With ``context_ids`` (the prompt's last ids) the concatenation is what the ids add
    to the context's text: ``decode(context + ids)`` after ``decode(context)``. A
    context whose text ends in an incomplete character (ids cut mid-character) cannot be
    subtracted exactly and is not used.
    """

    def __init__(
        self,
        tokenizer: TextCodec,
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = False,
        stop: StopChecker | None = None,
        context_ids: Sequence[int] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self.stop = stop if stop is not None else StopChecker()
        self._ids: list[int] = list(context_ids)
        if self._ids and self._decode(0, len(self._ids)).endswith(REPLACEMENT_CHARACTER):
            self._ids = []
        #: Where the output starts in ``_ids`` (after the context).
        self._start = len(self._ids)
        self._prefix_offset = 0
        self._read_offset = self._start
        self._finished = False
        self._matched_stop: str | int | None = None

    @property
    def token_ids(self) -> list[int]:
        """Ids decoded so far: every id fed, up to and including a stop token."""
        return self._ids[self._start :]

    @property
    def context_ids(self) -> list[int]:
        """The context the output continues (empty when none was given or usable)."""
        return self._ids[: self._start]

    @property
    def prefix_offset(self) -> int:
        """Start of the decode window in :attr:`token_ids` (negative inside the context)."""
        return self._prefix_offset - self._start

    @property
    def read_offset(self) -> int:
        """Ids of :attr:`token_ids` before this offset have produced their text."""
        return self._read_offset - self._start

    @property
    def finished(self) -> bool:
        """True once a stop matched or :meth:`finish` ran; later ids are ignored."""
        return self._finished

    def feed(self, token_ids: Iterable[int]) -> TextDelta:
        """Append ``token_ids`` and return the text they finalize.

        A stop token among them ends the request: ids after it are ignored, the token
        itself is decoded only with ``no_stop_trim`` (and then subject to
        ``skip_special_tokens``), and held-back text is flushed.
        """
        if self._finished:
            return TextDelta("", True, self._matched_stop)
        new_ids = list(token_ids)
        stop_index = self.stop.first_stop_token(new_ids)
        if stop_index is None:
            self._ids.extend(new_ids)
            return self._check(self._decode_step())
        stop_token = new_ids[stop_index]
        self._ids.extend(new_ids[: stop_index + 1])
        kept = len(self._ids) if self.stop.no_stop_trim else len(self._ids) - 1
        delta = self._check(self._decode_tail(kept))
        if delta.finished:
            return delta
        return self._end(delta.text + self.stop.flush(), stop_token)

    def finish(self) -> TextDelta:
        """End the request: return all text held back (an incomplete character included)."""
        if self._finished:
            return TextDelta("", True, self._matched_stop)
        delta = self._check(self._decode_tail(len(self._ids)))
        if delta.finished:
            return delta
        return self._end(delta.text + self.stop.flush(), None)

    def _check(self, text: str) -> TextDelta:
        """Pass finalized ``text`` through the stop checker."""
        scan = self.stop.push(text)
        if scan.matched is None:
            return TextDelta(scan.text)
        return self._end(scan.text, scan.matched)

    def _end(self, text: str, matched: str | int | None) -> TextDelta:
        self._finished = True
        self._matched_stop = matched
        return TextDelta(text, True, matched)

    def _decode(self, start: int, end: int) -> str:
        return self.tokenizer.decode(
            self._ids[start:end],
            skip_special_tokens=self.skip_special_tokens,
            spaces_between_special_tokens=self.spaces_between_special_tokens,
        )

    def _window_text(self, end: int) -> str:
        """Text that ``ids[read_offset:end]`` adds to the window's decoded prefix."""
        prefix_text = self._decode(self._prefix_offset, self._read_offset)
        return self._decode(self._prefix_offset, end)[len(prefix_text) :]

    def _decode_step(self, end: int | None = None) -> str:
        """Text finalized by ids up to ``end``; advances the offsets when there is any."""
        end = len(self._ids) if end is None else end
        if end <= self._read_offset:
            return ""
        new_text = self._window_text(end)
        if not new_text or new_text.endswith(REPLACEMENT_CHARACTER):
            return ""
        self._prefix_offset, self._read_offset = self._read_offset, end
        return new_text

    def _decode_tail(self, end: int) -> str:
        """Everything ``ids[read_offset:end]`` still owes, incomplete characters included."""
        if end <= self._read_offset:
            return ""
        new_text = self._window_text(end)
        self._prefix_offset, self._read_offset = self._read_offset, end
        return new_text
