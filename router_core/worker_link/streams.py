"""Per-request delivery of output rows to the coroutine that serves the request.

Rows arrive on the worker's one inbound socket in batches for many requests; each row is
handed to its request's :class:`ResponseStream`, which the HTTP handler reads with
``await stream.next_row()``. Pure asyncio, no sockets.

**The end-to-end check.** A text row says where its tokens start: at output token
``completion_tokens - len(output_ids)`` (the engine sends each step's new ids and the
running total; the detokenizer copies both). A stream counts the tokens its text rows
covered, and a text row that does not start there (rows were lost, or came twice, on the
way from the engine) ends the stream instead, with an abort row that names the missing
tokens and carries no text, a request lost to a fault (cause ``rows_lost``, see
:func:`~router_core.wire.finish.lost_reason`): a client gets a clear error, never a
silently wrong text.
``output_gap`` then says where. Rows that already abort (a detokenizer's own check, the
engine's aborts) are passed as they are; rows without both columns are not checked.

**Token rows.** A worker answers text: a ``BatchTokenIDOutput`` row reaching it (an
engine sending its token batches through the tokenizer router's ``outputs``, with no
detokenizer on the way) has no text to give, so it ends the stream with an abort of
status 502 (cause ``token_rows``, :data:`UNDETOKENIZED_MESSAGE`) instead of an empty
answer that would look like a success.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Final

from router_core.wire.finish import lost_reason
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput

__all__ = [
    "ROWS_LOST_CAUSE",
    "UNDETOKENIZED_CAUSE",
    "UNDETOKENIZED_MESSAGE",
    "UNDETOKENIZED_STATUS",
    "OutputRow",
    "ResponseStream",
    "finish_reason_of",
    "rows_lost_message",
]

#: The ``err_type`` of a stream ended because its rows did not follow.
ROWS_LOST_CAUSE: Final = "rows_lost"
#: The ``err_type`` and status of a stream ended by a token row, which has no text.
UNDETOKENIZED_CAUSE: Final = "token_rows"
UNDETOKENIZED_STATUS: Final = 502
UNDETOKENIZED_MESSAGE: Final = (
    "the engine sent token ids (TOKEN_BATCH) to this worker, which answers text only: "
    "send token batches to the detokenizer router, or text (STR_BATCH) through the "
    "tokenizer router"
)

#: A one-request slice of a batched output.
OutputRow = BatchStrOutput | BatchEmbeddingOutput | BatchTokenIDOutput


def finish_reason_of(row: OutputRow) -> dict[str, Any] | None:
    """The row's finish reason (``{"type": "length" | "stop" | "abort", ...}``), or None."""
    reasons = row.finished_reasons
    if not reasons:
        return None
    return reasons[0]


def rows_lost_message(received: int, position: int) -> str:
    """Why a row starting at output token ``position`` cannot follow the ``received``
    tokens so far, in words; tokens count from 0."""
    where = "between the engine and this worker"
    if position > received:
        return f"output rows were lost {where} (tokens {received}..{position - 1} missing)"
    return (
        f"output rows came twice or out of order {where} "
        f"(a row from token {position} after {received} tokens)"
    )


class ResponseStream:
    """The output rows of one request, in arrival order, until a finishing row.

    ``put`` never blocks (a request's rows are bounded by its own token count);
    ``next_row`` waits for the next one. After the finishing row, ``finished`` is True
    and ``put`` ignores further rows. A text row that does not follow the tokens so far
    finishes the stream with an abort row in its place (the module's end-to-end check).
    """

    __slots__ = (
        "_rows",
        "_tokens",
        "_wakeup",
        "engine_incarnation",
        "finished",
        "lost_cause",
        "output_gap",
        "rid",
        "rows",
        "sent",
        "suspect",
        "updated_at",
    )

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.finished = False
        #: The engine incarnation the request was sent to (0: unknown or not sent yet).
        self.engine_incarnation = 0
        #: When the stream opened or last got a row (monotonic seconds): the idle clock.
        self.updated_at = time.monotonic()
        #: ``(tokens received, the row's first token)`` when the stream ended because a
        #: row did not follow (rows lost or repeated on the way); None otherwise.
        self.output_gap: tuple[int, int] | None = None
        #: Why the stream ended as lost to a fault (a lost abort's ``err_type``); None if
        #: it did not. The engine may still be generating for it, so it is aborted there.
        self.lost_cause: str | None = None
        #: Rows received (0: not producing yet, e.g. still queued in the engine).
        self.rows = 0
        #: The request's frames as sent, kept until its first row: what a router restart
        #: may have lost, to send again (None once answered, or before it was sent).
        self.sent: list[bytes] | None = None
        #: ``(since, process)`` once an output-path process restarted while this stream
        #: was producing: if no row comes after ``since`` within the grace, its rows died
        #: with that process (None otherwise).
        self.suspect: tuple[float, str] | None = None
        #: Output tokens the text rows so far covered.
        self._tokens = 0
        self._rows: deque[OutputRow] = deque()
        self._wakeup: asyncio.Event = asyncio.Event()

    def put(self, row: OutputRow, at: float | None = None) -> bool:
        """Queue ``row`` (or, when it does not follow, the abort row ending the stream);
        False if the stream had already finished (the row is dropped). ``at`` is the
        time of arrival (monotonic seconds; None: now), the idle clock's new start."""
        if self.finished:
            return False
        self.updated_at = time.monotonic() if at is None else at
        self.rows += 1
        self.sent = None  # answered: a re-send is no longer needed
        if type(row) is BatchTokenIDOutput:
            row = self._token_row_refusal(row)
        reasons = row.finished_reasons
        reason = reasons[0] if reasons else None
        # Written out, not called: this runs for every row.
        if type(row) is BatchStrOutput:
            totals, ids = row.completion_tokens, row.output_ids
            if totals is not None and ids is not None:
                position = totals[0] - len(ids[0])
                if position == self._tokens or (
                    reason is not None and reason.get("type") == "abort"
                ):
                    self._tokens = totals[0]
                else:
                    row = self._gap_row(row, position)
                    reason = row.finished_reasons[0]  # type: ignore[index]
        if reason is not None:
            self.finished = True
        self._rows.append(row)
        self._wakeup.set()
        return True

    def _gap_row(self, row: BatchStrOutput, position: int) -> BatchStrOutput:
        """The abort row that replaces ``row``, which does not follow the tokens so far."""
        self.output_gap = (self._tokens, position)
        return BatchStrOutput(
            rids=[self.rid],
            finished_reasons=[
                lost_reason(ROWS_LOST_CAUSE, rows_lost_message(self._tokens, position))
            ],
            output_strs=[""],
            prompt_tokens=row.prompt_tokens,
            cached_tokens=row.cached_tokens,
            completion_tokens=[self._tokens],
        )

    def _token_row_refusal(self, row: BatchTokenIDOutput) -> BatchStrOutput:
        """The abort row that replaces a token row: a worker has no text to give for it."""
        reason = {
            "type": "abort",
            "message": UNDETOKENIZED_MESSAGE,
            "status_code": UNDETOKENIZED_STATUS,
            "err_type": UNDETOKENIZED_CAUSE,
        }
        return BatchStrOutput(
            rids=[self.rid],
            finished_reasons=[reason],
            output_strs=[""],
            prompt_tokens=row.prompt_tokens,
            completion_tokens=[self._tokens],
        )

    def close(self, reason: dict[str, Any], at: float | None = None) -> None:
        """End the stream from this side (the link is closing, or its request was lost):
        a synthetic finishing row, put at ``at`` (see :meth:`put`)."""
        if not self.finished:
            row = BatchStrOutput(rids=[self.rid], finished_reasons=[reason], output_strs=[""])
            self.put(row, at)

    async def next_row(self) -> OutputRow:
        """The next row, waiting for it if none is queued."""
        while not self._rows:
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._rows.popleft()

    def take_ready(self) -> list[OutputRow]:
        """Every row queued now, without waiting (a streaming handler coalesces them)."""
        rows = list(self._rows)
        self._rows.clear()
        return rows
