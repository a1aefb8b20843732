"""``GET /metrics``: the whole host's Prometheus metrics, read at scrape time.

A plain route (a mounted ASGI app would answer ``/metrics`` with a redirect to
``/metrics/``). It needs a token only when :attr:`AdminSettings.metrics_need_token` says
so; Prometheus then sends a viewer's token as ``Authorization: Bearer``. It answers 200
whenever the admin app runs: a router that does not answer is
``switchboard_router_up{process} 0``, never an error.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from app.deps import Metrics, MetricsReader
from app.errors import error_responses

__all__ = ["router"]

router = APIRouter(tags=["metrics"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the Prometheus text format (version 0.0.4)",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    },
    **error_responses(401),
}


@router.get("/metrics", response_class=Response, responses=_RESPONSES)
async def metrics(_: MetricsReader, host: Metrics) -> Response:
    """Every ``switchboard_*`` family of the host (see ``docs/metrics.md``)."""
    return Response(content=await host.exposition(), media_type=CONTENT_TYPE_PLAIN_0_0_4)
