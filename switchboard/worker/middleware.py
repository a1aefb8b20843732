"""The worker's request-body middleware: JSON by default, and its answer to a body over the
size limit (the limit itself is :class:`httpkit.body_limit.BodySizeLimit`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from httpkit.body_limit import Refusal
from router_core.counters import Counters
from switchboard.worker.errors import error_body
from switchboard.worker.metrics import NO_METRICS, Metrics

__all__ = ["AssumeJson", "body_too_large"]

#: Content types a client sends when it did not say what it sends (``curl -d`` does this).
_UNDECLARED = (b"", b"application/x-www-form-urlencoded")


class AssumeJson:
    """Treat a body with no content type (or curl's form default) as JSON.

    The API takes only JSON bodies, and ``curl URL -d '{...}'``, the way people try a
    server first, labels the body as a form; SGLang and OpenAI-compatible servers read
    it as JSON anyway.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            declared = dict(scope["headers"]).get(b"content-type", b"")
            if declared.split(b";")[0].strip().lower() in _UNDECLARED:
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


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
