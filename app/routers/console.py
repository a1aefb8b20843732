"""The operator console: ``/`` serves ``index.html``, ``/static/`` the files beside it.

Unauthenticated (the page holds no data; it asks the API with the token the operator
gives it). Every console response carries the console's Content-Security-Policy
(:mod:`app.headers`). Until the console's files exist both answer the usual JSON 404.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app.deps import Settings
from app.errors import ApiException

__all__ = ["CONSOLE_HEADERS", "router"]

router = APIRouter(include_in_schema=False)

#: The console's files change with each release; its security headers (the CSP among
#: them) are :mod:`app.headers`', on every console response.
CONSOLE_HEADERS = {"Cache-Control": "no-cache"}


@router.get("/")
async def console(settings: Settings) -> FileResponse:
    """The console page."""
    page = settings.static_dir / "index.html"
    if not page.is_file():
        raise ApiException(404, "not_found", "the operator console is not installed")
    return FileResponse(page, media_type="text/html", headers=CONSOLE_HEADERS)
