"""The process's tracer provider: made by :func:`setup`, flushed by :func:`shutdown`.

The OpenTelemetry SDK and the OTLP exporter are imported here only when tracing is on,
so a process with tracing off never loads them. State is module-level because a process
has one trace pipeline; :func:`enabled` is a plain read of it, cheap enough per message.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING, Final

from router_core.tracing.config import service_name, traces_endpoint, tracing_configured

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

__all__ = ["current_tracer", "enabled", "setup", "shutdown"]

#: How long :func:`shutdown` waits for queued spans to be exported; then it gives up on
#: them, so a stopping process never hangs on an unreachable collector.
FLUSH_TIMEOUT_S: Final = 3.0


class _Pipeline:
    """This process's trace pipeline (one per process, so module-level)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.set_up = False
        self.enabled = False
        self.provider: TracerProvider | None = None
        self.exporter: SpanExporter | None = None
        self.tracer: Tracer | None = None
        self.exit_hook_registered = False


_PIPELINE: Final = _Pipeline()


def enabled() -> bool:
    """Whether this process records spans (set by :func:`setup`)."""
    return _PIPELINE.enabled


def current_tracer() -> Tracer | None:
    """The tracer spans are made with, or None while tracing is off."""
    return _PIPELINE.tracer


def setup(role: str, instance_id: str, *, span_exporter: SpanExporter | None = None) -> bool:
    """Configure tracing for this process from the ``OTEL_*`` environment; return if it is on.

    On iff :func:`~router_core.tracing.config.tracing_configured` (an OTLP endpoint is
    set, the SDK is not disabled, the exporter is ``otlp``). Then spans go through a
    ``BatchSpanProcessor`` (``OTEL_BSP_*``) to the OTLP/HTTP protobuf exporter
    (``OTEL_EXPORTER_OTLP_*``), quiet while the collector is down (one warning, a summary
    a minute, a line on recovery: :mod:`router_core.tracing.quiet_export`), sampled by
    ``OTEL_TRACES_SAMPLER``/``_ARG`` (default ``parentbased_always_on``), with the
    resource ``service.name`` = ``switchboard-<role>``, ``service.instance.id`` =
    ``instance_id`` and ``process.pid``.
    A batch root linked to a sampled row context is always sampled, whatever the sampler
    (see :mod:`router_core.tracing.sampler`).

    ``span_exporter`` (tests) turns tracing on whatever the environment and exports each
    span synchronously to it. Idempotent: a second call returns the first one's answer;
    after :func:`shutdown` it configures again. ``ValueError`` for an unknown ``role``.
    """
    name = service_name(role)
    pipeline = _PIPELINE
    with pipeline.lock:
        if pipeline.set_up:
            return pipeline.enabled
        pipeline.set_up = True
        if span_exporter is None and not tracing_configured(os.environ):
            return False
        provider, exporter = _make_provider(name, instance_id, span_exporter)
        pipeline.provider, pipeline.exporter = provider, exporter
        pipeline.tracer = provider.get_tracer("switchboard")
        pipeline.enabled = True
        if not pipeline.exit_hook_registered:
            # Processes stop on SIGTERM by returning from their loop, so atexit runs:
            # spans still queued are flushed even if a caller forgets shutdown().
            atexit.register(shutdown)
            pipeline.exit_hook_registered = True
        return True


def _make_provider(
    name: str, instance_id: str, span_exporter: SpanExporter | None
) -> tuple[TracerProvider, SpanExporter]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from router_core.tracing.sampler import LinkedRootSampler

    resource = Resource.create(
        {"service.name": name, "service.instance.id": instance_id, "process.pid": os.getpid()}
    )
    # No sampler argument: the SDK reads OTEL_TRACES_SAMPLER/_ARG itself; we wrap its pick.
    # Our own atexit hook shuts it down (the SDK's would run a second shutdown).
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.sampler = LinkedRootSampler(provider.sampler)
    if span_exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        return provider, span_exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from router_core.tracing.quiet_export import quiet_exporter

    # Quiet while the collector is down: one warning, a summary a minute, one recovery line.
    exporter = quiet_exporter(OTLPSpanExporter(), traces_endpoint(os.environ))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider, exporter


def shutdown() -> None:
    """Export queued spans (for up to :data:`FLUSH_TIMEOUT_S`) and shut the provider
    down; a no-op when off or done already. Spans still unsent at the deadline (the
    collector is unreachable) are dropped: the exporter is shut, ending its retries.
    Each queued batch gets one try, no retry; while export is failing already, none.
    """
    pipeline = _PIPELINE
    with pipeline.lock:
        provider, exporter = pipeline.provider, pipeline.exporter
        pipeline.set_up = pipeline.enabled = False
        pipeline.provider = pipeline.tracer = pipeline.exporter = None
    if provider is None:
        return
    # One try per queued batch, no retry: a collector that is down costs no waiting.
    from router_core.tracing.quiet_export import QuietSpanExporter  # SDK loaded: tracing on

    if isinstance(exporter, QuietSpanExporter):
        exporter.last_tries()
    # The SDK's shutdown waits for the exporter's retries (up to its 10 s timeout, and
    # force_flush ignores its timeout), so it runs in a thread we stop waiting for.
    closing = threading.Thread(target=provider.shutdown, name="tracing-shutdown", daemon=True)
    closing.start()
    closing.join(FLUSH_TIMEOUT_S)
    if closing.is_alive() and exporter is not None:
        exporter.shutdown()
