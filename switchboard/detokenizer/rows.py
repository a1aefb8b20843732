"""Per-request detokenization of token rows: pure logic, no sockets, time passed in.

A :class:`RowDetokenizer` keeps one :class:`~switchboard.text.IncrementalDetokenizer` per
``(owner, rid)`` and turns each ``BatchTokenIDOutput`` row's new ``output_ids`` into the
new text of that step. Rows carry no stop strings (the engine applies them and reports
the match in ``finished_reasons``), so the matched string is trimmed when the finishing
row arrives. A stop string usually spans several steps, so the last characters of a
request's text are held back until more text arrives or the request finishes: as many as
the row's ``stop_holdback`` says (the longest stop string's length minus one, so a request
without stop strings streams with no delay), or ``holdback_chars`` when an engine does not
send that column; a match that starts further back than that can no longer be taken back and is
counted (``stop_trim_late``). A stop token id is trimmed by the incremental detokenizer.
State is forgotten when a request finishes and evicted when it is not updated for
``ttl_s`` seconds or when more than ``max_states`` requests are open (oldest first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from router_core.counters import Counters
from router_core.wire.finish import FinishReason
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.split import batch_columns
from switchboard.text import IncrementalDetokenizer, StopChecker, Tokenizer

__all__ = ["RowDetokenizer", "str_row"]

#: Released characters remembered per request, to find a stop string that began in them.
TAIL_CHARS: Final = 1024

#: Columns a token row and a text row share, copied as they are (never named one by one).
SHARED_COLUMNS: Final = tuple(
    column.name
    for column in batch_columns(BatchStrOutput)
    if column.name in {c.name for c in batch_columns(BatchTokenIDOutput)}
)


def str_row(row: BatchTokenIDOutput, owner: str, text: str) -> BatchStrOutput:
    """The one-request ``BatchStrOutput`` of ``row``: every shared column, and the text."""
    fields: dict[str, Any] = {}
    for name in SHARED_COLUMNS:
        value = getattr(row, name)
        if value is not None:
            fields[name] = value
    fields["http_worker_ipcs"] = [owner]
    fields["output_strs"] = [text]
    return BatchStrOutput(**fields)


def _first(column: list[Any] | None, default: Any) -> Any:
    if not column or column[0] is None:
        return default
    return column[0]


@dataclass
class _Request:
    detokenizer: IncrementalDetokenizer
    updated: float
    #: Text produced but not released yet (the hold-back window).
    held: str = ""
    #: The last released characters.
    tail: str = field(default="")


class RowDetokenizer:
    """Rows in, text out, with bounded per-request state."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        holdback_chars: int = 32,
        ttl_s: float = 600.0,
        max_states: int = 100_000,
        counters: Counters | None = None,
    ) -> None:
        if holdback_chars < 0 or ttl_s <= 0 or max_states <= 0:
            raise ValueError("holdback_chars >= 0, ttl_s > 0 and max_states > 0 are required")
        self.tokenizer = tokenizer
        self.holdback_chars = holdback_chars
        self.ttl_s = ttl_s
        self.max_states = max_states
        self.counters = counters if counters is not None else Counters()
        self._states: OrderedDict[tuple[str, str], _Request] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def row(self, row: BatchTokenIDOutput, owner: str, now: float) -> BatchStrOutput:
        """Detokenize one one-request token row owned by ``owner``."""
        text = self.step(
            (owner, row.rids[0]),
            _first(row.output_ids, []),
            _first(row.finished_reasons, None),
            skip_special_tokens=bool(_first(row.skip_special_tokens, True)),
            spaces_between_special_tokens=bool(_first(row.spaces_between_special_tokens, True)),
            no_stop_trim=bool(_first(row.no_stop_trim, False)),
            holdback_chars=_first(row.stop_holdback, None),
            now=now,
        )
        return str_row(row, owner, text)

    def step(
        self,
        key: tuple[str, str],
        new_ids: list[int],
        finished: dict[str, Any] | None,
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
        no_stop_trim: bool = False,
        holdback_chars: int | None = None,
        now: float = 0.0,
    ) -> str:
        """The new text of one step of request ``key``; forgets it when ``finished``.

        ``holdback_chars`` is the request's own hold-back window (the row's
        ``stop_holdback``); None means the detokenizer's default.
        """
        state = self._states.pop(key, None)
        if state is None:
            detokenizer = IncrementalDetokenizer(
                self.tokenizer,
                skip_special_tokens=skip_special_tokens,
                spaces_between_special_tokens=spaces_between_special_tokens,
            )
            state = _Request(detokenizer, now)
        reason = FinishReason.of(finished) if finished else None
        stop_token = reason.stop_token if reason is not None else None
        if stop_token is not None:
            # A stop token: the incremental detokenizer trims it (unless no_stop_trim).
            state.detokenizer.stop = StopChecker(
                stop_token_ids=[stop_token], no_stop_trim=no_stop_trim
            )
        text = state.detokenizer.feed(new_ids).text
        if finished is not None:
            text += state.detokenizer.finish().text
            stop_string = reason.stop_string if reason is not None else None
            return self._final(state, text, stop_string, no_stop_trim)
        state.updated = now
        self._states[key] = state
        buffer = state.held + text
        window = self.holdback_chars if holdback_chars is None else max(0, holdback_chars)
        cut = max(0, len(buffer) - window)
        released, state.held = buffer[:cut], buffer[cut:]
        if released:
            state.tail = (state.tail + released)[-TAIL_CHARS:]
        return released

    def _final(self, state: _Request, text: str, matched: str | None, no_stop_trim: bool) -> str:
        """Everything still owed at the end, cut at the matched stop string."""
        buffer = state.held + text
        if matched is None:
            return buffer
        full, base = state.tail + buffer, len(state.tail)
        # The match ends in text not yet released (the engine stops when it completes).
        start = full.find(matched, max(0, base - len(matched) + 1))
        if start < 0:
            self.counters.add("stop_trim", "not_found")
            return buffer
        end = start + len(matched) if no_stop_trim else start
        if end < base:
            self.counters.add("stop_trim", "late")
            return ""
        return full[base:end]

    def evict(self, now: float) -> int:
        """Forget requests idle for ``ttl_s`` and the oldest beyond ``max_states``."""
        evicted = 0
        while self._states:
            key, state = next(iter(self._states.items()))
            if state.updated > now - self.ttl_s and len(self._states) <= self.max_states:
                break
            del self._states[key]
            evicted += 1
        if evicted:
            self.counters.add("evicted", "states", evicted)
        return evicted
