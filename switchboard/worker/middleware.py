"""The worker's answer to a body over the size limit (the limit itself is
:class:`httpkit.body_limit.BodySizeLimit`; which bodies are read, and how, is
:mod:`switchboard.worker.json_body`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from httpkit.body_limit import Refusal
from router_core.counters import Counters
from switchboard.worker.errors import error_body
from switchboard.worker.metrics import NO_METRICS, Metrics

__all__ = ["body_too_large"]


def body_too_large(counters: Counters, metrics: Metrics = NO_METRICS) -> Refusal:
    """The worker's answer to a body over the limit, for
    :class:`~httpkit.body_limit.BodySizeLimit`: 413 in the worker's error shape, counted in
    ``counters`` and ``metrics`` as ``body_too_large``."""

    def refuse(max_bytes: int) -> Response:
        counters.add("http_rejected", "body_too_large")
        metrics.bad_request("body_too_large")
        message = f"request body exceeds {max_bytes} bytes"
        return JSONResponse(error_body(message, "invalid_request_error", 413), status_code=413)

    return refuse
