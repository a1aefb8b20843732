"""Security headers on every response of the admin app.

:class:`SecurityHeaders` is plain ASGI middleware that adds, to each response that does
not already carry them:

* on every response: ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy: no-referrer``;
* on the console's (``/`` and everything under ``/static/``, files, 404s and all): the
  console's Content-Security-Policy, :data:`CONSOLE_CSP` (its own files only, this
  origin only, never framed);
* on every other response (the API, ``/metrics``, the schema): :data:`API_CSP`, which
  lets a response load nothing and be framed nowhere, should a browser render one.

:func:`app.main.create_app` wraps the whole app in it, outside Starlette's own error
handling, so a 500 carries the headers too.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["API_CSP", "COMMON_HEADERS", "CONSOLE_CSP", "SecurityHeaders", "is_console_path"]

#: The console loads only its own files and talks only to this origin.
CONSOLE_CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
#: Anything else is data: nothing to load, nowhere to be framed.
API_CSP: Final = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
#: On every response.
COMMON_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def is_console_path(path: str) -> bool:
    """Whether ``path`` is the console's: its page or one of its static files."""
    return path == "/" or path.startswith("/static/") or path == "/static"


def _encoded(headers: dict[str, str]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((name.lower().encode(), value.encode()) for name, value in headers.items())


_CONSOLE: Final = _encoded({**COMMON_HEADERS, "Content-Security-Policy": CONSOLE_CSP})
_API: Final = _encoded({**COMMON_HEADERS, "Content-Security-Policy": API_CSP})


class SecurityHeaders:
    """Add the security headers to every HTTP response (see the module docstring); a
    header the response already has is left as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = _CONSOLE if is_console_path(scope["path"]) else _API

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {bytes(name).lower() for name, _ in headers}
                headers.extend(pair for pair in added if pair[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
