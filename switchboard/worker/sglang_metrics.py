"""``GET /metrics`` on the serving port: the workers' families, and SGLang's names of them.

SGLang serves ``/metrics`` on its serving port, and dashboards and alerts written for it
query ``sglang:*`` names carrying a ``model_name`` label. Workers share one port, so a
scrape reaches whichever worker the kernel picks: every worker therefore answers for the
whole host, from the stack's multiprocess directory (the same files the admin app's
``/metrics`` aggregates), never with its own share. The answer holds

* the directory's ``switchboard_*`` families as the admin app serves them (the routers'
  families, read over the control socket, are the admin app's alone), and
* SGLang's names of the same measurements (:func:`sglang_families`), summed over the
  workers, with ``model_name`` the served model's name:

==========================================  ==========================================
SGLang family                               from
==========================================  ==========================================
``sglang:prompt_tokens_total``              ``switchboard_prompt_tokens_total``
``sglang:generation_tokens_total``          ``switchboard_generation_tokens_total``
``sglang:num_requests_total``               the count of ``switchboard_e2e_request_latency_seconds``
``sglang:time_to_first_token_seconds``      ``switchboard_time_to_first_token_seconds``
``sglang:inter_token_latency_seconds``      ``switchboard_inter_token_latency_seconds``
``sglang:e2e_request_latency_seconds``      ``switchboard_e2e_request_latency_seconds``
``sglang:num_running_reqs``                 the engine's latest load snapshot: ``running``
``sglang:num_queue_reqs``                   its ``waiting``
``sglang:token_usage``                      its ``token_usage``
``sglang:gen_throughput``                   its ``tokens_per_s``
``sglang:cache_hit_rate``                   0: no engine here reuses a prefix cache
==========================================  ==========================================

The engine's gauges are absent until its first load snapshot. The route needs no token,
as SGLang's does not: it shows counts and latencies, never text.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from fastapi import APIRouter, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from app.metrics.exposition import multiprocess_families, render
from router_core.wire.control import LoadSnapshot
from switchboard.worker.deps import GenerationDep, SettingsDep
from switchboard.worker.metrics import MULTIPROC_ENV

__all__ = ["router", "sglang_families"]

router = APIRouter(tags=["metrics"])

#: SGLang's counter (name without ``_total``) → ours, with SGLang's help text.
_COUNTERS: Final = {
    "sglang:prompt_tokens": ("switchboard_prompt_tokens", "Number of prefill tokens processed."),
    "sglang:generation_tokens": (
        "switchboard_generation_tokens",
        "Number of generation tokens processed.",
    ),
}
#: SGLang's histogram → ours.
_HISTOGRAMS: Final = {
    "sglang:time_to_first_token_seconds": (
        "switchboard_time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
    ),
    "sglang:inter_token_latency_seconds": (
        "switchboard_inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
    ),
    "sglang:e2e_request_latency_seconds": (
        "switchboard_e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
    ),
}
_REQUESTS_FROM: Final = "switchboard_e2e_request_latency_seconds"


def _summed(family: Metric, sample_name: str) -> dict[str, float]:
    """``family``'s samples called ``sample_name`` summed over every label but ``le``
    (keyed by ``le``, ``""`` when there is none), in the order they first appear."""
    sums: dict[str, float] = {}
    for sample in family.samples:
        if sample.name == sample_name:
            le = sample.labels.get("le", "")
            sums[le] = sums.get(le, 0.0) + sample.value
    return sums


def _gauge(name: str, help_text: str, labels: dict[str, str], value: float) -> Metric:
    family = Metric(name, help_text, "gauge")
    family.samples = [Sample(name, labels, float(value))]
    return family


def sglang_families(
    families: Iterable[Metric], model_name: str, load: LoadSnapshot | None
) -> list[Metric]:
    """SGLang's families (module docstring) of the workers' ``families`` and the engine's
    latest ``load`` (None: before the first, so no engine gauges). A family of ours with
    no series yet gives none of SGLang's."""
    ours = {family.name.removesuffix("_total"): family for family in families}
    labels = {"model_name": model_name}
    out: list[Metric] = []
    for name, (source, help_text) in _COUNTERS.items():
        if source in ours:
            family = Metric(name, help_text, "counter")
            total = sum(_summed(ours[source], f"{source}_total").values())
            family.samples = [Sample(f"{name}_total", labels, total)]
            out.append(family)
    if _REQUESTS_FROM in ours:
        family = Metric("sglang:num_requests", "Number of requests processed.", "counter")
        count = sum(_summed(ours[_REQUESTS_FROM], f"{_REQUESTS_FROM}_count").values())
        family.samples = [Sample("sglang:num_requests_total", labels, count)]
        out.append(family)
    for name, (source, help_text) in _HISTOGRAMS.items():
        if source in ours:
            out.append(_histogram(name, help_text, ours[source], source, labels))
    if load is not None:
        out += [
            _gauge(
                "sglang:num_running_reqs", "The number of running requests.", labels, load.running
            ),
            _gauge(
                "sglang:num_queue_reqs",
                "The number of requests in the waiting queue.",
                labels,
                load.waiting,
            ),
            _gauge("sglang:token_usage", "The token usage.", labels, load.token_usage),
            _gauge(
                "sglang:gen_throughput",
                "The generation throughput (token/s).",
                labels,
                load.tokens_per_s,
            ),
            _gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", labels, 0.0),
        ]
    return out


def _histogram(
    name: str, help_text: str, source: Metric, source_name: str, labels: dict[str, str]
) -> Metric:
    family = Metric(name, help_text, "histogram")
    buckets = _summed(source, f"{source_name}_bucket")
    family.samples = [
        *(Sample(f"{name}_bucket", {**labels, "le": le}, value) for le, value in buckets.items()),
        Sample(f"{name}_sum", labels, sum(_summed(source, f"{source_name}_sum").values())),
        Sample(f"{name}_count", labels, sum(_summed(source, f"{source_name}_count").values())),
    ]
    return family


@router.get("/metrics", response_class=Response)
async def metrics(generation: GenerationDep, settings: SettingsDep) -> Response:
    """The host's ``switchboard_*`` families of the workers, engine and detokenizers,
    and SGLang's names of them (Prometheus text format 0.0.4; see the module docstring).
    A worker run without a metrics directory serves SGLang's engine gauges alone."""
    directory = os.environ.get(MULTIPROC_ENV)
    families = await asyncio.to_thread(multiprocess_families, Path(directory)) if directory else []
    ours = [family for family in families if family.name.startswith("switchboard_")]
    extra = sglang_families(ours, settings.model_name, generation.link.load)
    body = await asyncio.to_thread(render, [*ours, *extra])
    return Response(content=body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
