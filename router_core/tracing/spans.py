"""Spans for hops: one per message (:func:`hop_span`), one per batch (:func:`batch_span`,
or :func:`batch_span_if_traced` where a hop handles every message).

Every function here is a cheap no-op while tracing is off (no tracer): no context is
parsed and no OpenTelemetry module is imported beyond the API's ``INVALID_SPAN``. W3C
trace context is parsed and written with the SDK's ``TraceContextTextMapPropagator``, so
flags other than "sampled" (the SDK sets random-trace-id, ``03``) survive every hop.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal

from router_core.tracing.provider import current_tracer

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanContext, SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "Kind",
    "batch_span",
    "batch_span_if_traced",
    "hop_span",
    "is_sampled",
    "is_valid",
    "start_span",
    "traceparent_of",
]

#: A span's kind, as OpenTelemetry names them.
Kind = Literal["server", "client", "producer", "consumer", "internal"]

#: Attribute set on every batch span: how many rows the batch had.
BATCH_ROWS_ATTRIBUTE: Final = "messaging.batch.message_count"

#: ``00-<32 hex trace id>-<16 hex span id>-<2 hex flags>``: flags start at 53.
_TRACEPARENT_LENGTH: Final = 55

#: What :func:`batch_span_if_traced` returns for an untraced batch: one shared context
#: manager (``nullcontext`` is reusable and reentrant), so that path allocates nothing.
_UNTRACED: Final[AbstractContextManager[None]] = nullcontext()


def is_sampled(traceparent: str) -> bool:
    """Whether ``traceparent`` is a W3C traceparent with the sampled flag; ``""`` is not.

    A string check only (no context is parsed), so a hop may call it per row.
    """
    if len(traceparent) < _TRACEPARENT_LENGTH or traceparent[52] != "-":
        return False
    try:
        return bool(int(traceparent[53:55], 16) & 1)
    except ValueError:
        return False


@contextmanager
def hop_span(
    name: str,
    traceparent: str,
    *,
    kind: Kind = "consumer",
    attributes: Mapping[str, Any] | None = None,
    tracestate: str = "",
) -> Iterator[Span]:
    """A span around one message's handling, its parent ``traceparent``; current inside.

    ``traceparent`` ``""`` makes the span a child of the current span, or a root (subject
    to the sampler) when there is none: that is how HTTP entry points start traces. An
    exception escaping the block is recorded on the span. Off: yields ``INVALID_SPAN``.
    """
    tracer = current_tracer()
    valid, context = _parent(traceparent, tracestate) if tracer is not None else (False, None)
    if tracer is None or not valid:
        yield _invalid_span()
        return
    with tracer.start_as_current_span(
        name, context=context, kind=_span_kind(kind), attributes=_attributes(attributes)
    ) as span:
        yield span


@contextmanager
def batch_span(
    name: str,
    row_traceparents: Sequence[str],
    *,
    kind: Kind = "consumer",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span | None]:
    """One span around a batch's handling, linked to every sampled row context.

    Rows whose entry is ``""`` or unsampled are ignored. With exactly one distinct sampled
    context, that context is also the parent; with several, the span is a root (always
    sampled, see :mod:`router_core.tracing.sampler`) whose links join it to each request's
    trace. Yields None, doing nothing, when no row is sampled or tracing is off. The span
    carries ``messaging.batch.message_count`` (all rows) besides ``attributes``.
    """
    tracer = current_tracer()
    sampled = _distinct_sampled(row_traceparents) if tracer is not None else []
    if tracer is None or not sampled:
        yield None
        return
    from opentelemetry.context import Context
    from opentelemetry.trace import Link

    valid = [(tp, context) for tp in sampled if (context := _span_context(tp)).is_valid]
    if not valid:
        yield None
        return
    links = [Link(context) for _, context in valid]
    # Several contexts: an explicit empty context makes a root, not a child of the current.
    parent = _extract(valid[0][0], "") if len(valid) == 1 else Context()
    merged = {BATCH_ROWS_ATTRIBUTE: len(row_traceparents), **(attributes or {})}
    with tracer.start_as_current_span(
        name, context=parent, kind=_span_kind(kind), attributes=merged, links=links
    ) as span:
        yield span


def batch_span_if_traced(
    name: str,
    row_traceparents: Sequence[str],
    *,
    kind: Kind = "consumer",
    attributes: Mapping[str, Any] | None = None,
) -> AbstractContextManager[Span | None]:
    """:func:`batch_span` when tracing is on and ``row_traceparents`` (a header's
    ``row_traces``) is not empty; else one shared no-op context manager that yields None.

    For a hop that handles every message in a ``with`` block: the untraced path costs a
    truth test, a tracer read and entering a no-op, and creates nothing.
    """
    if not row_traceparents or current_tracer() is None:
        return _UNTRACED
    return batch_span(name, row_traceparents, kind=kind, attributes=attributes)


def start_span(
    name: str,
    traceparent: str = "",
    *,
    kind: Kind = "internal",
    attributes: Mapping[str, Any] | None = None,
    tracestate: str = "",
) -> Span:
    """Start a span the caller ends (``span.end()``); parent as for :func:`hop_span`.

    It is not made current. Off: returns ``INVALID_SPAN`` (ending it does nothing).
    """
    tracer = current_tracer()
    valid, context = _parent(traceparent, tracestate) if tracer is not None else (False, None)
    if tracer is None or not valid:
        return _invalid_span()
    return tracer.start_span(
        name, context=context, kind=_span_kind(kind), attributes=_attributes(attributes)
    )


def traceparent_of(span: Span | None) -> str:
    """The W3C traceparent naming ``span``, to send on; ``""`` unless it is sampled.

    By the propagation rule only sampled contexts travel, so an unsampled, non-recording
    or invalid span (and None, what :func:`batch_span` yields for nothing sampled) gives
    ``""``.
    """
    if span is None:
        return ""
    context = span.get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return ""
    from opentelemetry.trace import set_span_in_context

    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=set_span_in_context(span))
    return carrier.get("traceparent", "")


def _distinct_sampled(row_traceparents: Sequence[str]) -> list[str]:
    """The sampled entries, each once, in first-seen order."""
    return list(dict.fromkeys(tp for tp in row_traceparents if tp and is_sampled(tp)))


def is_valid(traceparent: str) -> bool:
    """Whether ``traceparent`` parses into a valid W3C context (sampled or not).

    An HTTP entry point ignores one that does not (and starts a new trace), as the W3C
    Trace Context recommendation asks; internal hops never do (see :func:`hop_span`).
    False while tracing is off (nothing parses then).
    """
    if not traceparent or current_tracer() is None:
        return False
    return _parent(traceparent, "")[0]


def _parent(traceparent: str, tracestate: str) -> tuple[bool, Context | None]:
    """``(usable, parent context)`` of a new span: ``(True, None)`` (the current span, or
    a root) for ``""``; ``(False, None)`` when ``traceparent`` does not parse, so that a
    hop never turns a garbled context into a new trace (only HTTP entry points start
    traces)."""
    if not traceparent:
        return True, None
    from opentelemetry.trace import get_current_span

    context = _extract(traceparent, tracestate)
    return get_current_span(context).get_span_context().is_valid, context


def _extract(traceparent: str, tracestate: str) -> Context:
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _propagator().extract(carrier)


def _span_context(traceparent: str) -> SpanContext:
    from opentelemetry.trace import get_current_span

    return get_current_span(_extract(traceparent, "")).get_span_context()


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if attributes is None else dict(attributes)


@cache
def _propagator() -> TraceContextTextMapPropagator:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def _span_kind(kind: Kind) -> SpanKind:
    from opentelemetry.trace import SpanKind

    try:
        return _kinds(SpanKind)[kind]
    except KeyError:
        raise ValueError(f"unknown span kind {kind!r}") from None


@cache
def _kinds(span_kind: type[SpanKind]) -> dict[str, SpanKind]:
    return {member.name.lower(): member for member in span_kind}


def _invalid_span() -> Span:
    from opentelemetry.trace import INVALID_SPAN

    return INVALID_SPAN
