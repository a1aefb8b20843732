"""HTTP server spans and route templates, shared by the admin app and the HTTP workers.

:class:`RouteTemplates` names a request by the route that serves it (``/v1/models/{model}``,
never the raw path), so span names and metric labels stay few; a path no route serves is
``other``. :class:`ServerSpans` is plain ASGI middleware making one server span per HTTP
request, ``"<role> <METHOD> <route>"``, whose parent is the request's ``traceparent``
header (else a root, subject to the sampler). Inside the request,
:func:`server_traceparent` is that span's context to send on (``""`` when not sampled).

Install :class:`ServerSpans` only when ``tracing.enabled()``: a stack without tracing then
does no span or context work at all, and :func:`server_traceparent` is one context
variable read that returns ``""``.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Final

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router_core import tracing

__all__ = ["OTHER_ROUTE", "RouteTemplates", "ServerSpans", "server_traceparent"]

#: The route name of a path no route serves.
OTHER_ROUTE: Final = "other"

_TRACEPARENT: ContextVar[str] = ContextVar("switchboard_server_traceparent", default="")


def server_traceparent() -> str:
    """The current request's server span as a W3C traceparent; ``""`` when none is sampled."""
    return _TRACEPARENT.get()


class RouteTemplates:
    """The route template serving a request, among ``routes``.

    Give the routes themselves (each included ``APIRouter``'s ``routes``, whose paths
    carry the router's prefix, and the app's own such as a static mount): an app's
    ``router.routes`` may hold included routers whose routes are not listed. Routes
    without a path are skipped. Paths of routes without parameters are a dictionary
    lookup; the others are matched in order. A route that matches the path but not the
    method still names the request (a 405).
    """

    def __init__(self, routes: Iterable[BaseRoute]) -> None:
        self._exact: dict[str, str] = {}
        self._matched: list[tuple[BaseRoute, str]] = []
        for route in routes:
            path = getattr(route, "path", None)
            if not isinstance(path, str):
                continue
            if "{" in path or not hasattr(route, "methods"):
                self._matched.append((route, path))  # parameters, or a mount's sub-paths
            else:
                self._exact.setdefault(path, path)

    def template(self, scope: Scope) -> str:
        """The template of the route serving ``scope``, or :data:`OTHER_ROUTE`."""
        path: str = scope["path"]
        found = self._exact.get(path)
        if found is not None:
            return found
        for route, template in self._matched:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return template
        return OTHER_ROUTE


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


class ServerSpans:
    """One server span per HTTP request, named ``"<role> <METHOD> <route>"``.

    The span carries ``http.request.method``, ``http.route``, ``url.path`` and
    ``http.response.status_code``; a 5xx answer, or an exception, marks it an error.
    Other ASGI traffic (lifespan) passes through untouched.
    """

    def __init__(self, app: ASGIApp, *, role: str, routes: RouteTemplates) -> None:
        self.app = app
        self.role = role
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        route = self.routes.template(scope)
        attributes = {"http.request.method": method, "http.route": route, "url.path": scope["path"]}
        incoming, state = _header(scope, b"traceparent"), _header(scope, b"tracestate")
        if incoming and not tracing.is_valid(incoming):
            incoming, state = "", ""  # W3C: ignore a malformed context, start a new trace
        with tracing.hop_span(
            f"{self.role} {method} {route}",
            incoming,
            kind="server",
            attributes=attributes,
            tracestate=state,
        ) as span:
            token = _TRACEPARENT.set(tracing.traceparent_of(span))

            async def traced_send(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        from opentelemetry.trace import Status, StatusCode

                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, traced_send)
            finally:
                _TRACEPARENT.reset(token)
