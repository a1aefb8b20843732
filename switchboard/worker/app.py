"""``create_app``: one worker's FastAPI application, its lifespan owning the worker link."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from httpkit.body_limit import BodySizeLimit
from httpkit.spans import RouteTemplates
from router_core.worker_link import WorkerIdentity, WorkerLink
from switchboard.text import TextCodec
from switchboard.worker import chat_api, native, openai_api, sglang_metrics, sglang_ops
from switchboard.worker.admin_client import AdminClient
from switchboard.worker.api_docs import install_api_docs
from switchboard.worker.errors import install_error_handlers
from switchboard.worker.generation import Generation
from switchboard.worker.ignored_fields import IgnoredFields
from switchboard.worker.metrics import Metrics, worker_metrics
from switchboard.worker.middleware import body_too_large
from switchboard.worker.observe import install_observers, outputs_observer
from switchboard.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from switchboard.text.chat_template import ChatTemplate

__all__ = ["create_app"]


def create_app(
    settings: WorkerSettings,
    tokenizer: TextCodec,
    metrics: Metrics | None = None,
    *,
    chat_template: ChatTemplate | None = None,
) -> FastAPI:
    """The worker's app; its lifespan opens the link (registering with the router) and
    closes it (deregistering) after the last request. No I/O happens before startup.

    ``chat_template`` renders chat requests (``app.state.chat_template``); None: the
    model has none, and the chat endpoint refuses every request saying so.

    ``metrics`` defaults to :func:`~switchboard.worker.metrics.worker_metrics` (recording
    only when ``PROMETHEUS_MULTIPROC_DIR`` is set); server spans are made when tracing was
    set up before this call.
    """
    if metrics is None:
        metrics = worker_metrics(settings.worker_id)
    identity = WorkerIdentity(
        settings.worker_id,
        settings.link.address,
        pid=os.getpid(),
        host=socket.gethostname(),
        version=settings.version,
        started_ns=time.time_ns(),
    )
    link = WorkerLink(settings.link, identity, on_outputs=outputs_observer(metrics))
    metrics.export_counters(link.counters)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await link.open()
        flusher = asyncio.create_task(metrics.flush_periodically()) if metrics.enabled else None
        try:
            yield
        finally:
            await link.close()
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            metrics.flush()

    app = FastAPI(
        title="Switchboard worker",
        version=settings.version or "dev",
        summary="SGLang-native and OpenAI-compatible generation over a Switchboard router",
        lifespan=lifespan,
        # FastAPI's pages load Swagger UI and ReDoc from a CDN: /docs is served offline.
        docs_url=None,
        redoc_url=None,
    )
    install_api_docs(app, title="Switchboard worker")
    app.state.settings = settings
    app.state.chat_template = chat_template
    app.state.link = link
    app.state.metrics = metrics
    app.state.generation = Generation(link, tokenizer, settings, metrics)
    app.state.ignored_fields = IgnoredFields(metrics)
    install_error_handlers(app, link.counters, settings.retry_after_s, metrics)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        refusal=body_too_large(link.counters, metrics),
    )
    app.include_router(native.router)
    app.include_router(openai_api.router)
    app.include_router(chat_api.router)
    sglang_ops.install(app, AdminClient(settings.admin_url))
    app.include_router(sglang_metrics.router)
    routes = RouteTemplates(
        [
            *app.router.routes,
            *native.router.routes,
            *openai_api.router.routes,
            *chat_api.router.routes,
            *sglang_ops.router.routes,
            *sglang_metrics.router.routes,
        ]
    )
    install_observers(app, metrics, routes)
    return app
