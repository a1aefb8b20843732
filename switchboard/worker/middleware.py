"""Plain ASGI middleware for request bodies: a size limit, and JSON by default.

Neither buffers a body itself, so streaming responses pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router_core.counters import Counters
from switchboard.worker.metrics import NO_METRICS, Metrics

__all__ = ["AssumeJson", "BodySizeLimit"]

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


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    """Answer 413 to a request whose body exceeds ``max_bytes`` (declared or streamed),
    counted in ``counters`` and ``metrics`` as ``body_too_large``."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, counters: Counters, metrics: Metrics = NO_METRICS
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.counters = counters
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        self.counters.add("http_rejected", "body_too_large")
        self.metrics.bad_request("body_too_large")
        body = (
            b'{"error":{"message":"request body exceeds %d bytes","type":'
            b'"invalid_request_error","param":null,"code":413}}' % self.max_bytes
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
