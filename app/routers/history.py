"""``/api/history``: the whole stack's throughput and latency over the last 15 minutes
(viewers too), for the console's chart.

One sample per read of the workers' metrics (every 5 s, :mod:`app.stats_sampler`); what
each figure means is :mod:`app.stack_history`. The console reads it all when it opens
and then asks only for samples newer than its last (``?after=``). It answers even while
the router does not.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from app.catalogue import command
from app.errors import error_responses
from app.routers.binding import bind
from app.stack_history import HistoryPage
from app.stats_sampler import WorkerStatsSampler

__all__ = ["router"]

router = APIRouter(tags=["workers"])


def _sampler(request: Request) -> WorkerStatsSampler:
    sampler: WorkerStatsSampler = request.app.state.worker_stats
    return sampler


Sampler = Annotated[WorkerStatsSampler, Depends(_sampler)]


@bind(router, command("history"), response_model=HistoryPage, responses=error_responses(400, 401))
async def history(
    sampler: Sampler,
    after: Annotated[
        float | None,
        Query(description="only the samples stamped later than this (Unix seconds)"),
    ] = None,
) -> HistoryPage:
    """The stack's requests/s, tokens/s and latency p50 / p95 per sampling interval, oldest
    first; ``available: false`` when the app reads no metrics directory."""
    return sampler.history_page(after)
