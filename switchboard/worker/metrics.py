"""The worker's Prometheus metrics (``docs/metrics.md``, "HTTP serving"), or none at all.

:func:`worker_metrics` returns a :class:`PrometheusMetrics` when ``PROMETHEUS_MULTIPROC_DIR``
is set (``switchboard up`` sets it for every child), writing through ``prometheus_client``
in multiprocess mode into that directory, which the admin app aggregates; otherwise
:data:`NO_METRICS`, whose methods do nothing and which imports nothing, so a worker with
metrics off pays a method call per event. Every series carries ``worker`` (the worker id);
histograms use the shared bounds of :mod:`router_core.histogram`, so they merge with the
routers' families bucket by bucket.

Per-token and per-message observations (inter-token latency, generated tokens, the
backward route's messages, bytes and hop latency) go through
:mod:`~switchboard.worker.metric_buffers` and reach the files on :meth:`Metrics.flush`,
which the app's lifespan calls every second and at exit.

Request timing starts when the HTTP middleware calls :meth:`Metrics.http_started`, which
also marks the request's arrival for the generations it starts (a context variable,
inherited by the tasks and the streaming body of that request): time to first token and
end-to-end latency count from there, including a wait for admission while paused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

from httpkit.limits import REFUSAL_STATUSES
from router_core.counters import Counters
from router_core.histogram import HOP_BUCKETS, ITL_BUCKETS
from router_core.wire.finish import LOST_CAUSES
from switchboard.counter_export import CounterExport
from switchboard.process_export import ProcessUsageExport
from switchboard.worker.metric_buffers import FLUSH_INTERVAL_S, CounterBuffer, HistogramBuffer
from switchboard.worker.metric_families import worker_families

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

__all__ = [
    "BAD_REQUEST_REASONS",
    "BAD_REQUEST_STATUSES",
    "MULTIPROC_ENV",
    "NO_METRICS",
    "GenerationTimer",
    "Metrics",
    "PrometheusMetrics",
    "worker_metrics",
]

logger = logging.getLogger(__name__)

#: Where prometheus_client's multiprocess mode keeps its files (set before it is imported).
MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
#: Statuses that mean "bad input": these refusals count in ``switchboard_bad_requests_total``.
BAD_REQUEST_STATUSES: Final = frozenset({400, 413, 415})
#: The worker's bad-input reasons, reported at 0 from the start so the series exist.
BAD_REQUEST_REASONS: Final = (
    "invalid_request",
    "invalid_prompt",
    "invalid_unicode",
    "over_cap",
    "unsupported_media_type",
    "body_too_large",
)

#: When the HTTP request being handled arrived (``time.monotonic()``), set by the middleware.
_ARRIVED: ContextVar[float | None] = ContextVar("switchboard_worker_request_arrived", default=None)


class GenerationTimer:
    """One generation's token timing; this base records nothing (metrics off)."""

    __slots__ = ()

    def chunk(self, completion_tokens: int, *, finished: bool) -> None:
        """A chunk reached the client: ``completion_tokens`` generated so far, in total."""


class Metrics:
    """What the worker records; this base records nothing (metrics off)."""

    enabled: bool = False

    def http_started(self) -> float:
        """A request arrived: count it in flight; its arrival time, to pass back when it ends.

        Generations started while the request is handled time themselves from here.
        """
        return 0.0

    def http_finished(self, arrived: float, handler: str, status: int) -> None:
        """The request that :meth:`http_started` returned ``arrived`` for has answered
        ``status`` (its last byte is sent, or it failed): count it and its duration."""

    def bad_request(self, reason: str) -> None:
        """A request was refused as bad input (400, 413 or 415) for ``reason``."""

    def http_refused(self, reason: str) -> None:
        """The HTTP layer refused a request or connection before any route, for
        ``reason`` (a key of :data:`httpkit.limits.REFUSAL_STATUSES`)."""

    def ignored_field(self, handler: str, name: str) -> None:
        """A request to ``handler`` (a route template) held the unknown field ``name``
        (dotted where nested), which was ignored; ``name`` is a bounded label value."""

    def generation(self, prompt_tokens: int) -> GenerationTimer:
        """A generation request of ``prompt_tokens`` was sent: its timer."""
        return _NO_TIMER

    def backward_output(self, latency_s: float | None, rows: int, nbytes: int) -> None:
        """An output message of ``rows`` rows and ``nbytes`` bytes arrived ``latency_s``
        after its sender stamped it (None: not stamped); the worker link's hook."""

    def export_counters(self, counters: Counters) -> None:
        """Export ``counters``' ``rejected`` counts (the worker link's) on every flush."""

    def flush(self) -> None:
        """Write buffered observations out (see the module docstring)."""

    async def flush_periodically(self) -> None:
        """:meth:`flush` every :data:`FLUSH_INTERVAL_S` until cancelled; a failed flush is
        logged and the next one tried (metrics never take a worker down)."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            try:
                self.flush()
            except Exception:
                logger.exception("worker metrics: flush failed")


_NO_TIMER: Final = GenerationTimer()
#: The recorder of a worker with metrics off.
NO_METRICS: Final = Metrics()


class _Timer(GenerationTimer):
    __slots__ = ("_arrived", "_e2e", "_generated", "_itl", "_last", "_tokens", "_ttft")

    def __init__(self, metrics: PrometheusMetrics, arrived: float) -> None:
        # Per request: TTFT and end-to-end go straight to the files; per token: buffers.
        self._arrived = arrived
        self._ttft = metrics.ttft
        self._itl = metrics.itl
        self._e2e = metrics.e2e
        self._generated = metrics.generation_tokens
        self._tokens = 0
        self._last: float | None = None

    def chunk(self, completion_tokens: int, *, finished: bool) -> None:
        now = time.monotonic()
        new = completion_tokens - self._tokens
        if new > 0:
            if self._last is None:
                self._ttft.observe(now - self._arrived)
            else:
                # One observation per token of this chunk, each the gap shared out.
                self._itl.observe((now - self._last) / new, times=new)
            self._generated.inc(new)
            self._tokens = completion_tokens
            self._last = now
        if finished:
            self._e2e.observe(now - self._arrived)


class PrometheusMetrics(Metrics):
    """The worker's series in the multiprocess directory, all labelled ``worker``."""

    enabled = True

    def __init__(self, worker_id: str) -> None:
        families = worker_families()
        self.worker_id = worker_id
        self._families = families
        self.in_flight = families.in_flight.labels(worker=worker_id)
        self.in_flight.set(0)  # the series exists (at 0) before the first request
        self.ttft = families.ttft.labels(worker=worker_id)
        self.e2e = families.e2e.labels(worker=worker_id)
        self.prompt_tokens = families.prompt_tokens.labels(worker=worker_id)
        self.itl = HistogramBuffer(families.itl.labels(worker=worker_id), ITL_BUCKETS)
        self.generation_tokens = CounterBuffer(families.generation_tokens.labels(worker=worker_id))
        self.backward_hop = HistogramBuffer(
            families.hop_latency.labels(route="backward"), HOP_BUCKETS
        )
        self.backward_messages = CounterBuffer(
            families.messages.labels(route="backward", worker=worker_id)
        )
        self.backward_bytes = CounterBuffer(
            families.message_bytes.labels(route="backward", worker=worker_id)
        )
        self._exports: list[tuple[CounterExport, Counters]] = []
        self._usage = ProcessUsageExport("worker", f"worker-{worker_id}")
        self._buffers = (
            self.itl,
            self.generation_tokens,
            self.backward_hop,
            self.backward_messages,
            self.backward_bytes,
        )
        #: (handler, status) -> its request counter and duration histogram children.
        self._answered: dict[tuple[str, int], tuple[Counter, Histogram]] = {}
        for reason in BAD_REQUEST_REASONS:
            families.bad_requests.labels(worker=worker_id, reason=reason)
        for reason in REFUSAL_STATUSES:
            families.http_refusals.labels(worker=worker_id, reason=reason)

    def http_started(self) -> float:
        arrived = time.monotonic()
        _ARRIVED.set(arrived)
        self.in_flight.inc()
        return arrived

    def http_finished(self, arrived: float, handler: str, status: int) -> None:
        elapsed = time.monotonic() - arrived
        self.in_flight.dec()
        children = self._answered.get((handler, status))
        if children is None:
            # Few keys: handlers are route templates, statuses a handful of codes.
            families, worker = self._families, self.worker_id
            children = self._answered[(handler, status)] = (
                families.requests.labels(worker=worker, handler=handler, status=str(status)),
                families.duration.labels(worker=worker, handler=handler),
            )
        requests, duration = children
        requests.inc()
        duration.observe(elapsed)

    def bad_request(self, reason: str) -> None:
        self._families.bad_requests.labels(worker=self.worker_id, reason=reason).inc()

    def http_refused(self, reason: str) -> None:
        self._families.http_refusals.labels(worker=self.worker_id, reason=reason).inc()

    def ignored_field(self, handler: str, name: str) -> None:
        self._families.ignored_fields.labels(
            worker=self.worker_id, handler=handler, field=name
        ).inc()

    def generation(self, prompt_tokens: int) -> GenerationTimer:
        self.prompt_tokens.inc(prompt_tokens)
        arrived = _ARRIVED.get()
        return _Timer(self, time.monotonic() if arrived is None else arrived)

    def backward_output(self, latency_s: float | None, rows: int, nbytes: int) -> None:
        self.backward_messages.inc()
        self.backward_bytes.inc(nbytes)
        if latency_s is not None:
            self.backward_hop.observe(latency_s)

    def export_counters(self, counters: Counters) -> None:
        exported = ("rejected", "lost_requests", "resent_requests")
        known = {"lost_requests": sorted(LOST_CAUSES), "resent_requests": ["router_restarted"]}
        self._exports.append((CounterExport("worker", exported, known=known), counters))

    def flush(self) -> None:
        for buffer in self._buffers:
            buffer.flush()
        for export, counters in self._exports:
            export.sync(counters)
        self._usage.sync()


def worker_metrics(worker_id: str) -> Metrics:
    """:class:`PrometheusMetrics` for ``worker_id`` if ``PROMETHEUS_MULTIPROC_DIR`` is set,
    else :data:`NO_METRICS`. Call once per process, after the environment is final."""
    if not os.environ.get(MULTIPROC_ENV):
        return NO_METRICS
    return PrometheusMetrics(worker_id)
