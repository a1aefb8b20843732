"""``/api/worker_stats``: each worker's errors and latency over the last minute (viewers too).

Read from the metrics the workers already write (``docs/metrics.md``), sampled by the
app every few seconds (:mod:`app.stats_sampler`); what each figure means is
:mod:`app.worker_stats`. It answers even while the router does not.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from app.catalogue import command
from app.errors import error_responses
from app.routers.binding import bind
from app.stats_sampler import WorkerStatsSampler
from app.worker_stats import WorkerStatsPage

__all__ = ["router"]

router = APIRouter(tags=["workers"])


def _sampler(request: Request) -> WorkerStatsSampler:
    sampler: WorkerStatsSampler = request.app.state.worker_stats
    return sampler


Sampler = Annotated[WorkerStatsSampler, Depends(_sampler)]


@bind(
    router,
    command("worker_stats"),
    response_model=WorkerStatsPage,
    responses=error_responses(401),
)
async def worker_stats(sampler: Sampler) -> WorkerStatsPage:
    """Per worker: requests, 5xx errors, 4xx refusals, and generation latency (mean, p50,
    p95) over the window; ``available: false`` when the app reads no metrics directory."""
    return sampler.page()
