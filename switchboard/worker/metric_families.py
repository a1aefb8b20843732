"""The worker's Prometheus metric families (``docs/metrics.md``, "HTTP serving").

Made once per process, on first use, by :func:`worker_families`: ``prometheus_client``
keeps one value file per process and family kind, so a second set would share files.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

from router_core.histogram import E2E_BUCKETS, HOP_BUCKETS, HTTP_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

__all__ = ["WorkerFamilies", "worker_families"]


class WorkerFamilies:
    """The worker's metric families, created once per process (prometheus_client keeps
    one value file per process and family kind, whatever the registry)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        # registry=None: the admin app reads the multiprocess directory, never this process.
        self.requests: Final[Counter] = Counter(
            "switchboard_http_requests_total",
            "HTTP requests answered",
            ["worker", "handler", "status"],
            registry=None,
        )
        self.duration: Final[Histogram] = Histogram(
            "switchboard_http_request_duration_seconds",
            "HTTP request handling, from request start to the last byte of the response",
            ["worker", "handler"],
            buckets=HTTP_BUCKETS,
            registry=None,
        )
        self.in_flight: Final[Gauge] = Gauge(
            "switchboard_http_requests_in_flight",
            "HTTP requests being handled now",
            ["worker"],
            multiprocess_mode="livesum",
            registry=None,
        )
        self.ttft: Final[Histogram] = Histogram(
            "switchboard_time_to_first_token_seconds",
            "from request arrival to the first generated token",
            ["worker"],
            buckets=TTFT_BUCKETS,
            registry=None,
        )
        self.itl: Final[Histogram] = Histogram(
            "switchboard_inter_token_latency_seconds",
            "between consecutive chunks of a stream, per token of the later chunk",
            ["worker"],
            buckets=ITL_BUCKETS,
            registry=None,
        )
        self.e2e: Final[Histogram] = Histogram(
            "switchboard_e2e_request_latency_seconds",
            "a generation request from arrival to its last token",
            ["worker"],
            buckets=E2E_BUCKETS,
            registry=None,
        )
        self.prompt_tokens: Final[Counter] = Counter(
            "switchboard_prompt_tokens_total",
            "prompt tokens of generation requests",
            ["worker"],
            registry=None,
        )
        self.generation_tokens: Final[Counter] = Counter(
            "switchboard_generation_tokens_total", "tokens generated", ["worker"], registry=None
        )
        self.bad_requests: Final[Counter] = Counter(
            "switchboard_bad_requests_total",
            "requests refused as bad input (400/413/415), by reason",
            ["worker", "reason"],
            registry=None,
        )
        self.http_refusals: Final[Counter] = Counter(
            "switchboard_http_refusals_total",
            "requests the HTTP layer refused before any route (408/421/403/431/503), by reason",
            ["worker", "reason"],
            registry=None,
        )
        self.ignored_fields: Final[Counter] = Counter(
            "switchboard_ignored_fields_total",
            "request body fields no endpoint names, ignored (reject_unknown_fields off)",
            ["worker", "handler", "field"],
            registry=None,
        )
        self.messages: Final[Counter] = Counter(
            "switchboard_messages_total",
            "messages per route and worker",
            ["route", "worker"],
            registry=None,
        )
        self.message_bytes: Final[Counter] = Counter(
            "switchboard_message_bytes_total",
            "bytes of messages per route and worker",
            ["route", "worker"],
            registry=None,
        )
        self.hop_latency: Final[Histogram] = Histogram(
            "switchboard_hop_latency_seconds",
            "from the sender's sent_ns to receipt, per route",
            ["route"],
            buckets=HOP_BUCKETS,
            registry=None,
        )


@cache
def worker_families() -> WorkerFamilies:
    """The families, made on first use: a second set in one process would share files."""
    return WorkerFamilies()
