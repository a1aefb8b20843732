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
A request's first row also gives the prompt's last ids, ``decode_ids[:read_offsets]``
(SGLang's shape: ``decode_ids`` is the prompt's tail then the output so far), which
the output's text continues from (:func:`prompt_context`).
State is forgotten when a request finishes and evicted when it is not updated for
``ttl_s`` seconds or when more than ``max_states`` requests are open (oldest first).

**Continuity.** Text continues exactly only from the state of every earlier row, so each
row's place in its request is checked before it is decoded: it starts at output token
``completion_tokens - len(output_ids)`` (the engine sends the step's new ids and the
running total), which must be the count of tokens this detokenizer has decoded for the
request. When it is not, the row becomes a finishing abort row with no text, a request
lost to a fault (:func:`~router_core.wire.finish.lost_reason`, so workers answer it with
a 503 naming the cause), and the request's state is forgotten:

* no state and a row past token 0: the state was lost (this detokenizer restarted, the
  request moved here, or it was evicted): ``detokenizer_state_lost``, counted
  ``output_continuity{lost_state}``;
* state, and the row starts later: rows were lost on the way: ``rows_lost`` (``{gap}``);
* state, and it starts earlier: rows came twice or out of order: ``rows_lost`` (``{overlap}``).

An aborted request is remembered (bounded as the states are), so its later rows are not
answered with one abort each: :meth:`RowDetokenizer.text_row` drops them
(``dropped{aborted_request}``), :meth:`RowDetokenizer.row` (for a caller that sends a row
for every row) answers them with :data:`ALREADY_ABORTED`; a row at token 0 starts a new
request under that key. A row that aborts already and does not follow keeps its reason
(the engine's words say more) and loses its text. Rows without ``completion_tokens`` are
decoded unchecked, counted once per request (``output_continuity{unchecked}``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from router_core.counters import Counters
from router_core.wire.finish import FinishReason, abort_reason, lost_reason
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from switchboard.detokenizer.row_columns import finished_row, first_value, prompt_context, str_row
from switchboard.text import IncrementalDetokenizer, StopChecker, TextCodec

__all__ = [
    "ALREADY_ABORTED",
    "LOST_STATE",
    "ROWS_LOST_CAUSE",
    "STATE_LOST_CAUSE",
    "RowDetokenizer",
    "discontinuity",
    "str_row",
]

#: Released characters remembered per request, to find a stop string that began in them.
TAIL_CHARS: Final = 1024

#: The abort message of a request whose decoding state is gone.
LOST_STATE: Final = (
    "the detokenizer lost this request's decoding state (it restarted or evicted it); "
    "the text cannot continue exactly"
)
#: The ``err_type`` of those aborts, and of the aborts for rows lost (or repeated) upstream.
STATE_LOST_CAUSE: Final = "detokenizer_state_lost"
ROWS_LOST_CAUSE: Final = "rows_lost"
#: Where this check sees rows go missing, as its messages say.
BEFORE_DETOKENIZER: Final = "before the detokenizer"
#: The abort message :meth:`RowDetokenizer.row` repeats for a row of an aborted request.
ALREADY_ABORTED: Final = "the detokenizer already aborted this request"


def discontinuity(decoded: int, position: int, where: str) -> str:
    """Why a row starting at output token ``position`` cannot follow ``decoded`` tokens,
    in words (``where`` names the hop: "before the detokenizer"). Token numbers count
    from 0."""
    if position > decoded:
        return f"output rows were lost {where} (tokens {decoded}..{position - 1} missing)"
    return (
        f"output rows came twice or out of order {where} "
        f"(a row from token {position} after {decoded} tokens)"
    )


@dataclass
class _Request:
    detokenizer: IncrementalDetokenizer
    updated: float
    #: Text produced but not released yet (the hold-back window).
    held: str = ""
    #: The last released characters.
    tail: str = field(default="")
    #: Output tokens fed so far (the next row must start here).
    decoded: int = 0


class RowDetokenizer:
    """Rows in, text out, with bounded per-request state."""

    def __init__(
        self,
        tokenizer: TextCodec,
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
        #: Requests aborted for a discontinuity, oldest first: when last heard of.
        self._aborted: OrderedDict[tuple[str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def aborted(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` was aborted for a discontinuity and its rows are being dropped."""
        return key in self._aborted

    def text_row(self, row: BatchTokenIDOutput, owner: str, now: float) -> BatchStrOutput | None:
        """The text row of one one-request token row owned by ``owner``: its new text, or
        an abort row if it cannot continue its request exactly; None (counted) for a row
        of a request already aborted here, which is not to be sent."""
        text = self._convert(row, owner, now)
        if text is None:
            self.counters.add("dropped", "aborted_request")
        return text

    def row(self, row: BatchTokenIDOutput, owner: str, now: float) -> BatchStrOutput:
        """:meth:`text_row` for a caller that sends a row for every row: one that
        :meth:`text_row` drops comes back as an abort row again (:data:`ALREADY_ABORTED`,
        counted ``output_continuity{repeated_abort}``); the worker's stream has ended and
        drops it."""
        text = self._convert(row, owner, now)
        if text is None:
            self.counters.add("output_continuity", "repeated_abort")
            return finished_row(row, owner, abort_reason(ALREADY_ABORTED))
        return text

    def _convert(self, row: BatchTokenIDOutput, owner: str, now: float) -> BatchStrOutput | None:
        key = (owner, row.rids[0])
        new_ids: list[int] = first_value(row.output_ids, [])
        finished: dict[str, Any] | None = first_value(row.finished_reasons, None)
        total: int | None = first_value(row.completion_tokens, None)
        position = None if total is None else total - len(new_ids)
        if key in self._aborted:
            if position != 0:
                self._forget_aborted(key, finished is not None, now)
                return None
            del self._aborted[key]  # token 0: a new request under the same key
        if position is None:
            if key not in self._states:
                self.counters.add("output_continuity", "unchecked")
        else:
            state = self._states.get(key)
            decoded = 0 if state is None else state.decoded
            if position != decoded:
                reason = self._why_not_continuous(state, position)
                if finished is not None and finished.get("type") == "abort":
                    return self._abort(row, key, owner, None, now)  # the engine's words
                return self._abort(row, key, owner, reason, now)
        text = self.step(
            key,
            new_ids,
            finished,
            skip_special_tokens=bool(first_value(row.skip_special_tokens, True)),
            spaces_between_special_tokens=bool(
                first_value(row.spaces_between_special_tokens, True)
            ),
            no_stop_trim=bool(first_value(row.no_stop_trim, False)),
            holdback_chars=first_value(row.stop_holdback, None),
            context_ids=prompt_context(row) if key not in self._states else (),
            now=now,
        )
        return str_row(row, owner, text)

    def _abort(
        self,
        row: BatchTokenIDOutput,
        key: tuple[str, str],
        owner: str,
        reason: dict[str, Any] | None,
        now: float,
    ) -> BatchStrOutput:
        """End request ``key`` with an abort row with no text, its text cannot continue
        exactly: finishing for ``reason``, or for the row's own abort reason when None."""
        self._states.pop(key, None)
        if reason is None:
            return str_row(row, owner, "")
        if first_value(row.finished_reasons, None) is None:  # more rows will come: drop them
            self._aborted[key] = now
        return finished_row(row, owner, reason)

    def _why_not_continuous(self, state: _Request | None, position: int) -> dict[str, Any]:
        """The finish reason of a row at ``position`` that does not follow ``state``."""
        if state is None and position > 0:
            self.counters.add("output_continuity", "lost_state")
            return lost_reason(STATE_LOST_CAUSE, LOST_STATE)
        decoded = 0 if state is None else state.decoded
        self.counters.add("output_continuity", "gap" if position > decoded else "overlap")
        return lost_reason(ROWS_LOST_CAUSE, discontinuity(decoded, position, BEFORE_DETOKENIZER))

    def _forget_aborted(self, key: tuple[str, str], finished: bool, now: float) -> None:
        """A row of an aborted request: the last one ends the memory, others refresh it."""
        if finished:
            del self._aborted[key]
        else:
            self._aborted[key] = now
            self._aborted.move_to_end(key)

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
        context_ids: list[int] | tuple[()] = (),
        now: float = 0.0,
    ) -> str:
        """The new text of one step of request ``key``; forgets it when ``finished``.

        ``holdback_chars`` is the request's own hold-back window (the row's
        ``stop_holdback``); None means the detokenizer's default. ``context_ids``, read
        only on a request's first step, are the prompt ids its text continues.
        """
        state = self._states.pop(key, None)
        if state is None:
            detokenizer = IncrementalDetokenizer(
                self.tokenizer,
                skip_special_tokens=skip_special_tokens,
                spaces_between_special_tokens=spaces_between_special_tokens,
                context_ids=context_ids,
            )
            state = _Request(detokenizer, now)
        reason = FinishReason.of(finished) if finished else None
        stop_token = reason.stop_token if reason is not None else None
        if stop_token is not None:
            # A stop token: the incremental detokenizer trims it (unless no_stop_trim).
            state.detokenizer.stop = StopChecker(
                stop_token_ids=[stop_token], no_stop_trim=no_stop_trim
            )
        state.decoded += len(new_ids)
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
        """Forget requests idle for ``ttl_s`` and the oldest beyond ``max_states``; the
        aborted requests remembered are bounded the same way."""
        horizon = now - self.ttl_s
        evicted = _evict(self._states, lambda state: state.updated, horizon, self.max_states)
        if evicted:
            self.counters.add("evicted", "states", evicted)
        forgotten = _evict(self._aborted, lambda since: since, horizon, self.max_states)
        if forgotten:
            self.counters.add("evicted", "aborted_requests", forgotten)
        return evicted


def _evict(
    entries: OrderedDict[tuple[str, str], Any],
    updated: Callable[[Any], float],
    horizon: float,
    limit: int,
) -> int:
    """Drop the oldest ``entries`` while last updated by ``horizon`` or more than ``limit``."""
    evicted = 0
    while entries:
        key, entry = next(iter(entries.items()))
        if updated(entry) > horizon and len(entries) <= limit:
            break
        del entries[key]
        evicted += 1
    return evicted
