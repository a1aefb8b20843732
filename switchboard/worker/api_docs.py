"""The worker's ``/docs``: Swagger UI served by the worker itself, so it works offline.

FastAPI's own ``/docs`` page loads Swagger UI from a CDN: on a host without Internet
access (most serving hosts) it is blank, and it runs a third party's script on the
worker's origin. Here the page and its files come from the worker: Swagger UI 5 (the
first that renders OpenAPI 3.1, which FastAPI's schemas are), as the ``fastapi-offline``
package ships it, served under ``/docs/static/``. The page's Content-Security-Policy
allows nothing from elsewhere, so a file that tried would fail visibly rather than
phone out. ``/openapi.json`` stays FastAPI's.
"""

from __future__ import annotations

import importlib.resources
from typing import Final

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["DOCS_CSP", "DOCS_PATH", "STATIC_PATH", "install_api_docs"]

DOCS_PATH: Final = "/docs"
STATIC_PATH: Final = "/docs/static"
#: Swagger UI's page starts itself from an inline script and styles inline; the rest is
#: the worker's own (its icons are data: URLs).
DOCS_CSP: Final = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
)


def _static_directory() -> str:
    """Where the installed ``fastapi-offline`` keeps Swagger UI's files."""
    return str(importlib.resources.files("fastapi_offline") / "static")


def install_api_docs(app: FastAPI, *, title: str) -> None:
    """Serve Swagger UI for ``app``'s ``/openapi.json`` at :data:`DOCS_PATH` (the app is
    made with ``docs_url=None`` so that FastAPI's CDN page is not)."""
    app.mount(STATIC_PATH, StaticFiles(directory=_static_directory()), name="docs-static")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def api_docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - API",
            swagger_js_url=f"{STATIC_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PATH}/favicon.png",
        )
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page
