"""Canned router ``metrics`` snapshots (the shape of the routers' ``metrics`` command), as
the control client decodes them, and expositions read back by family and sample."""

from __future__ import annotations

from typing import Any

import msgspec
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from router_core.control.replies import RouterMetrics, TokenizerRouterMetrics
from router_core.histogram import HOP_BUCKETS, Histogram

__all__ = [
    "by_name",
    "detokenizer_metrics",
    "detokenizer_snapshot",
    "histogram",
    "parse",
    "tokenizer_metrics",
    "tokenizer_snapshot",
    "value",
]


def histogram(bounds: tuple[float, ...], *values: float) -> dict[str, Any]:
    """A router histogram snapshot of ``values``."""
    series = Histogram(bounds)
    for value in values:
        series.observe(value)
    return series.snapshot()


def tokenizer_snapshot() -> dict[str, Any]:
    """What the tokenizer router answers to ``metrics`` (see the contract)."""
    return {
        "process": "tokenizer_router",
        "pid": 4242,
        "traffic": [
            {"route": "forward", "worker": "w0", "messages": 3, "bytes": 300},
            {"route": "control", "worker": "w0", "messages": 2, "bytes": 40},
        ],
        "dropped": {"backlog_full": 1},
        "rejected": {"bad_header": 2},
        "histograms": {
            "hop_latency_seconds": {"forward": histogram(HOP_BUCKETS, 0.0001, 0.002)},
            "split_batch_rows": {},
            "pause_barrier_seconds": {"pause": histogram((0.1, 1.0), 0.05)},
        },
        "backlog_messages": 4,
        "workers": [
            {
                "worker": "w0",
                "address": "ipc:///run/worker-w0",
                "state": "serving",
                "up": 1,
                "last_heartbeat_unix_s": 1700000000.5,
                "in_flight": 2,
                "host": "gpu-a",
            },
            {
                "worker": "w0",
                "address": "ipc:///run/worker-w0",
                "state": "dead",
                "up": 0,
                "last_heartbeat_unix_s": 1690000000.0,
                "in_flight": 0,
            },
        ],
        "workers_by_state": {"serving": 1, "dead": 0},
        "paused": False,
        "pause_state_since_unix_s": 1700000000.0,
        "pause_operations": [
            {"operation": "pause", "mode": "abort", "result": "complete", "count": 1}
        ],
        "engine": {"up": True, "running": 5, "waiting": 1, "max_running": 256, "token_usage": 0.25},
    }


def detokenizer_snapshot() -> dict[str, Any]:
    """What the detokenizer router answers: the fabric families only."""
    return {
        "process": "detokenizer_router",
        "pid": 4243,
        "traffic": [
            {"route": "detokenize", "worker": "ipc:///run/worker-w0", "messages": 7, "bytes": 700}
        ],
        "dropped": {},
        "rejected": {},
        "histograms": {
            "hop_latency_seconds": {"detokenize": histogram(HOP_BUCKETS, 0.0003)},
            "split_batch_rows": {"detokenize": histogram((1.0, 2.0, 4.0), 1, 3)},
        },
        "backlog_messages": 0,
    }


def tokenizer_metrics(snapshot: dict[str, Any] | None = None) -> TokenizerRouterMetrics:
    """A tokenizer router snapshot (default: :func:`tokenizer_snapshot`) as the client
    decodes it."""
    return msgspec.convert(snapshot or tokenizer_snapshot(), TokenizerRouterMetrics)


def detokenizer_metrics(snapshot: dict[str, Any] | None = None) -> RouterMetrics:
    """A detokenizer router snapshot as the client decodes it."""
    return msgspec.convert(snapshot or detokenizer_snapshot(), RouterMetrics)


def by_name(families: list[Metric]) -> dict[str, Metric]:
    return {family.name: family for family in families}


def value(family: Metric, sample: str, **labels: str) -> float:
    """The one sample of ``family`` named ``sample`` with exactly ``labels``."""
    found = [s.value for s in family.samples if s.name == sample and s.labels == labels]
    assert len(found) == 1, f"{sample}{labels}: {found} in {family.samples}"
    return found[0]


def parse(text: bytes) -> dict[str, Any]:
    """The exposition parsed back by prometheus_client, by family name."""
    return {family.name: family for family in text_string_to_metric_families(text.decode())}
