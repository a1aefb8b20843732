"""How a worker observes its HTTP traffic: request metrics, server spans, backward hops.

:func:`install_observers` adds the middleware a worker's metrics and tracing need, and
only what is on: with metrics off and tracing off it adds nothing.
:func:`outputs_observer` is the worker link's ``on_outputs`` hook recording the backward
hop's latency, or None with metrics off.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from httpkit.spans import RouteTemplates, ServerSpans
from router_core import tracing
from router_core.worker_link import OutputsObserver
from switchboard.worker.metrics import Metrics

__all__ = ["HttpMetrics", "install_observers", "outputs_observer"]


class HttpMetrics:
    """Plain ASGI middleware counting each HTTP request by route template and status.

    In flight from the moment it arrives to the moment its handler returns (a streaming
    response's last byte is sent by then); a request whose handler fails before answering
    counts as 500.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: RouteTemplates) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = self.metrics.http_started()
        status = 500

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            self.metrics.http_finished(arrived, self.routes.template(scope), status)


def install_observers(app: FastAPI, metrics: Metrics, routes: RouteTemplates) -> None:
    """Add :class:`HttpMetrics` (metrics on) and the ``worker`` server spans (tracing on),
    naming requests by ``routes``, as the outermost middleware, so they see every
    answer, the 413s of the body limit too.

    Call after the app's other middleware is added.
    """
    if tracing.enabled():
        app.add_middleware(ServerSpans, role="worker", routes=routes)
    if metrics.enabled:
        app.add_middleware(HttpMetrics, metrics=metrics, routes=routes)


def outputs_observer(metrics: Metrics) -> OutputsObserver | None:
    """The worker link's ``on_outputs`` hook: each output message counted on route
    ``backward`` (messages, bytes) and its hop latency observed; None with metrics off."""
    return metrics.backward_output if metrics.enabled else None
