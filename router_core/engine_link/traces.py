"""The engine's request spans: one ``engine request`` span per traced request.

Used by :class:`~router_core.engine_link.EngineLink` only while tracing is on. A request
that arrives with a (sampled) ``traceparent`` gets a span whose parent is that context;
the engine sees the request with the span's own context instead, and every output row of
the request carries it in the header's ``row_traces``, so the hops downstream (detokenizer
router, detokenizer, worker) join the trace under the engine's span. The span ends when
the request's finishing row has been sent, when it is aborted, or when the link closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from router_core import tracing
from router_core.engine_link.inputs import Request
from router_core.wire import Kind
from router_core.wire.finish import FinishReason
from router_core.wire.outputs import BatchOutput
from router_core.wire.requests import AbortRequest

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["MAX_OPEN_SPANS", "REQUEST_SPAN", "RequestSpans"]

#: The name of a request's span in the engine.
REQUEST_SPAN: Final = "engine request"
#: Open request spans kept at most; beyond, the oldest is ended (an engine that never
#: finishes requests must not grow without bound).
MAX_OPEN_SPANS: Final = 10_000

_TRACED_KINDS: Final = frozenset({Kind.GENERATE, Kind.EMBED})


class RequestSpans:
    """Open ``engine request`` spans keyed by ``(owner, rid)``; empty while tracing is off."""

    def __init__(self, limit: int = MAX_OPEN_SPANS) -> None:
        if limit <= 0:
            raise ValueError("limit must be positive")
        self._limit = limit
        self._open: dict[tuple[str, str], tuple[Span, str]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def on_request(self, request: Request) -> Request:
        """Start the span of a traced request (returned with the span's traceparent), or
        end the spans an ``ABORT`` names; anything else is returned as it is."""
        if request.kind is Kind.ABORT:
            assert isinstance(request.payload, AbortRequest)
            self._abort(request.reply_to, request.rid, request.payload)
            return request
        if request.kind not in _TRACED_KINDS or not request.traceparent:
            return request
        key = (request.reply_to, request.rid)
        self._end(key, "replaced")
        span = tracing.start_span(
            REQUEST_SPAN,
            request.traceparent,
            kind="consumer",
            attributes={"switchboard.rid": request.rid, "switchboard.kind": request.kind.name},
            tracestate=request.tracestate,
        )
        traceparent = tracing.traceparent_of(span)
        if not traceparent:  # not sampled after all: nothing travels
            span.end()
            return request
        if len(self._open) >= self._limit:
            self._end(next(iter(self._open)), "evicted")
        self._open[key] = (span, traceparent)
        return msgspec.structs.replace(request, traceparent=traceparent)

    def row_traces(self, batch: BatchOutput) -> list[str]:
        """Each row's request span context (``""`` for untraced rows); [] if none is traced."""
        owners = batch.http_worker_ipcs
        if not self._open or owners is None:
            return []
        traces = [
            "" if entry is None else entry[1]
            for entry in map(self._open.get, zip(owners, batch.rids, strict=False))
        ]
        return traces if any(traces) else []

    def finish(self, batch: BatchOutput) -> None:
        """End the spans of the rows of ``batch`` that finish their request."""
        owners, reasons = batch.http_worker_ipcs, batch.finished_reasons
        if owners is None or reasons is None:
            return
        for owner, rid, reason in zip(owners, batch.rids, reasons, strict=False):
            if reason is not None and (owner, rid) in self._open:
                self._end((owner, rid), _reason_type(reason))

    def close(self) -> None:
        """End every open span (the link is closing)."""
        for key in list(self._open):
            self._end(key, "closed")

    def _abort(self, owner: str, rid: str, abort: AbortRequest) -> None:
        if abort.abort_all:
            for key in [key for key in self._open if key[0] == owner]:
                self._end(key, "abort")
        else:
            self._end((owner, rid), "abort")

    def _end(self, key: tuple[str, str], outcome: str) -> None:
        entry = self._open.pop(key, None)
        if entry is not None:
            span = entry[0]
            span.set_attribute("switchboard.outcome", outcome)
            span.end()


def _reason_type(reason: dict[str, Any]) -> str:
    kind = FinishReason.of(reason).type
    return "finished" if kind is None else kind
