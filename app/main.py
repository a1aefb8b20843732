"""``create_app(settings)``: the admin app, its lifespan owning the control client and poller.

Nothing happens before startup: the lifespan connects one
:class:`~router_core.control.AsyncControlClient` to the router (and one to the
detokenizer router when its endpoint is set, for ``/metrics``), starts the one
:class:`~app.poller.EventPoller` task feeding the :class:`~app.events.EventHub`, and on
shutdown ends every event stream, stops the poller and closes the clients (and the
audit file). In front of the routes, outermost first: the security headers on every
response (:mod:`app.headers`); a mutation's token checked before its body is read, and
every mutation attempt audited (:class:`~app.guard.MutationGuard`); a request body over
``settings.max_body_bytes`` answered 413 before the app reads it
(:class:`~httpkit.body_limit.BodySizeLimit`). With tracing set up before
:func:`create_app`, every request gets an ``admin <METHOD> <route>`` span.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp

from app import routers
from app.audit import audit_log as app_audit_log
from app.audit_trail import trail_of
from app.errors import ApiException, install_error_handlers
from app.events import EventHub, sse_frame
from app.guard import MutationGuard
from app.headers import SecurityHeaders
from app.metrics import HostMetrics
from app.poller import EventPoller
from app.router_api import RouterApi
from app.settings import AdminSettings
from app.state import AdminState
from app.stats_sampler import WorkerStatsSampler
from httpkit.body_limit import BodySizeLimit
from httpkit.spans import RouteTemplates, ServerSpans
from router_core import tracing
from router_core.audit import AuditLog
from router_core.control import AsyncControlClient, control_client_keys

__all__ = ["create_app"]

_DESCRIPTION = """\
Operate a Switchboard stack: workers and their registration state, the pause/continue
barrier across every worker and the engine, drain, engine load and a live event stream.

Send `Authorization: Bearer <token>`: a viewer's token for reads, an operator's for
everything. A body is read as JSON whatever its `Content-Type` says (curl's `-d` works).
Every error answers `{"error": {"code": "...", "message": "..."}}`. A mutation
(POST) without an operator's token is answered 401/403 before any of its body is read. A
request body over the app's limit (1 MiB by default, `SWITCHBOARD_ADMIN_MAX_BODY_BYTES`)
is answered 413, no more of it read than the limit. Every mutation attempt, refused or
not, writes one audit record."""


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The schema without FastAPI's 422 answers: validation errors are 400 ``bad_request``."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
            components = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    return build


def _body_too_large(max_bytes: int) -> JSONResponse:
    """The answer to a body over the limit, in the app's one error shape (413)."""
    return ApiException(413, "body_too_large", f"request body exceeds {max_bytes} bytes").response()


class _AdminApp(FastAPI):
    """FastAPI with :class:`~app.headers.SecurityHeaders` outside its whole middleware
    stack, Starlette's error handling included, so even a 500 carries the headers."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def create_app(settings: AdminSettings, *, audit_log: AuditLog | None = None) -> FastAPI:
    """The admin app for ``settings`` (see the module docstring). Audit records go to
    ``audit_log`` (default: one for ``settings.audit_log``); the lifespan opens it on
    startup (an unusable file stops the startup) and closes it on shutdown."""
    audit = audit_log if audit_log is not None else app_audit_log(settings.audit_log)
    trail = trail_of(audit)
    sampler = WorkerStatsSampler(settings.metrics_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        key = settings.control_key.get_secret_value() if settings.control_key else None
        # KeyFileError (naming the file) for an unusable one stops the startup.
        curve = control_client_keys(
            settings.control_curve_key_pair, settings.control_server_public_key
        )
        client = AsyncControlClient(
            settings.control_endpoint,
            timeout_s=settings.control_timeout_s,
            key=key,
            actor="admin",
            curve=curve,
        )
        clients = {"tokenizer_router": client}
        if settings.detok_control_endpoint is not None:
            clients["detokenizer_router"] = AsyncControlClient(
                settings.detok_control_endpoint,
                timeout_s=settings.metrics_timeout_s,
                key=key,
                actor="admin",
                curve=curve,
            )
        audit.open()
        for each in clients.values():
            await each.start()
        router = RouterApi(
            client, admin_version=settings.version, timeout_s=settings.control_timeout_s
        )
        hub = EventHub(settings.subscriber_queue, settings.max_subscribers)
        trail.follow(lambda entry: hub.publish(sse_frame("audit", entry)))
        poller = EventPoller(router, hub, settings.poll_interval_s)
        metrics = HostMetrics(
            clients, multiproc_dir=settings.metrics_dir, timeout_s=settings.metrics_timeout_s
        )
        app.state.admin = AdminState(settings, router, hub, poller, metrics)
        task = asyncio.create_task(poller.run(), name="admin-event-poller")
        sampling = asyncio.create_task(sampler.run(), name="admin-worker-stats")
        try:
            yield
        finally:
            trail.follow(None)
            hub.close()
            for each_task in (task, sampling):
                each_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await each_task
            for each in clients.values():
                await each.close()
            audit.close()

    app = _AdminApp(
        title="Switchboard admin",
        version=settings.version or "dev",
        summary="Operate a Switchboard stack: workers, pause/continue, drain, load, events",
        description=_DESCRIPTION,
        lifespan=lifespan,
        # /api/workers/x/ is not a path of this API: 404, not an undocumented redirect.
        redirect_slashes=False,
        # FastAPI's /docs page loads Swagger UI from a CDN, and script from elsewhere on
        # the console's origin could read its token: the schema is at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    app.state.audit_trail = trail
    app.state.worker_stats = sampler
    modules = (
        routers.workers,
        routers.worker_stats,
        routers.history,
        routers.status,
        routers.operations,
        routers.load,
        routers.events,
        routers.audit,
        routers.health,
        routers.whoami,
        routers.commands,
        routers.console,
        routers.metrics,
    )
    for module in modules:
        app.include_router(module.router)
    app.mount(
        "/static",
        StaticFiles(directory=settings.static_dir, check_dir=False),
        name="static",
    )
    # Innermost first. The guard is outside the body limit, so that a mutation without a
    # valid token is refused before a byte of its body is read (the limit reads a chunked
    # body ahead), and sees the limit's 413 to audit it; both are inside the spans, so
    # that a refused request still gets its span.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, refusal=_body_too_large)
    app.add_middleware(MutationGuard, tokens=settings.tokens, audit_log=audit)
    if tracing.enabled():
        routes = [*app.router.routes, *(r for m in modules for r in m.router.routes)]
        app.add_middleware(ServerSpans, role="admin", routes=RouteTemplates(routes))
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    return app
