"""Per-request delivery of output rows to the coroutine that serves the request.

Rows arrive on the worker's one inbound socket in batches for many requests; each row is
handed to its request's :class:`ResponseStream`, which the HTTP handler reads with
``await stream.next_row()``. Pure asyncio, no sockets.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput

__all__ = ["OutputRow", "ResponseStream", "finish_reason_of"]

#: A one-request slice of a batched output.
OutputRow = BatchStrOutput | BatchEmbeddingOutput | BatchTokenIDOutput


def finish_reason_of(row: OutputRow) -> dict[str, Any] | None:
    """The row's finish reason (``{"type": "length" | "stop" | "abort", ...}``), or None."""
    reasons = row.finished_reasons
    if not reasons:
        return None
    return reasons[0]


class ResponseStream:
    """The output rows of one request, in arrival order, until a finishing row.

    ``put`` never blocks (a request's rows are bounded by its own token count);
    ``next_row`` waits for the next one. After the finishing row, ``finished`` is True
    and ``put`` ignores further rows.
    """

    __slots__ = ("_rows", "_wakeup", "engine_incarnation", "finished", "rid", "updated_at")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.finished = False
        #: The engine incarnation the request was sent to (0: unknown or not sent yet).
        self.engine_incarnation = 0
        #: When the stream opened or last got a row (monotonic seconds): the idle clock.
        self.updated_at = time.monotonic()
        self._rows: deque[OutputRow] = deque()
        self._wakeup: asyncio.Event = asyncio.Event()

    def put(self, row: OutputRow) -> bool:
        """Queue ``row``; False if the stream had already finished (the row is dropped)."""
        if self.finished:
            return False
        self.updated_at = time.monotonic()
        if finish_reason_of(row) is not None:
            self.finished = True
        self._rows.append(row)
        self._wakeup.set()
        return True

    def close(self, reason: dict[str, Any]) -> None:
        """End the stream from this side (the link is closing): a synthetic finishing row."""
        if not self.finished:
            self.put(BatchStrOutput(rids=[self.rid], finished_reasons=[reason], output_strs=[""]))

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
