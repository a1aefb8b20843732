"""OpenTelemetry tracing for every Switchboard process, off unless an OTLP endpoint is set.

One process calls :func:`setup` once at start (role and instance id) and :func:`shutdown`
in its ``finally``; every hop then asks ``tracing.enabled() and bool(context)`` before it
does any trace work, so a stack without tracing pays one bool read per message and
imports no OpenTelemetry SDK.

Propagation rule: only sampled contexts travel. A header's ``traceparent`` (requests) or
``row_traces[i]`` (batches) is either ``""`` or a sampled W3C traceparent, so a hop never
starts a root span for unsampled traffic; only HTTP entry points make roots.

* :func:`hop_span` -- one span for one message, its parent the message's traceparent.
* :func:`batch_span` -- one span for a batch, a link to each sampled row context; the
  parent too when exactly one distinct sampled context is present (the OTel messaging
  convention), else a root with links.
* :func:`batch_span_if_traced` -- :func:`batch_span` for a batch whose header carries
  ``row_traces`` while tracing is on; a shared no-op otherwise (the per-message form).
* :func:`start_span` / :func:`traceparent_of` -- a span ended by hand, and the context to
  send on for it.
"""

from router_core.tracing.provider import enabled, setup, shutdown
from router_core.tracing.spans import (
    Kind,
    batch_span,
    batch_span_if_traced,
    hop_span,
    is_sampled,
    is_valid,
    start_span,
    traceparent_of,
)

__all__ = [
    "Kind",
    "batch_span",
    "batch_span_if_traced",
    "enabled",
    "hop_span",
    "is_sampled",
    "is_valid",
    "setup",
    "shutdown",
    "start_span",
    "traceparent_of",
]
