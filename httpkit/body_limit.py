"""A request body size limit, as plain ASGI middleware shared by the worker and the admin app.

:class:`BodySizeLimit` answers a request whose body exceeds ``max_bytes`` with the app's
own refusal (a 413 in the app's error shape), before the app reads any of it:

* a body whose ``Content-Length`` declares more is refused without reading a byte;
* a body with a declared length within the limit is passed through untouched (the HTTP
  server frames the body by that length, so no more than it can arrive);
* a body of undeclared length (``Transfer-Encoding: chunked``) is read by the middleware
  up to the limit before the app runs: past it, the request is refused and the rest is
  never read; within it, the app is handed the chunks read, then the connection's own
  ``receive`` (a disconnect still reaches it).

Why read ahead rather than count as the app reads: the app reads a body inside
FastAPI's request parsing, which turns any exception raised from ``receive`` into
``400 There was an error parsing the body``, and whatever the app has sent by then
cannot be taken back. Reading ahead keeps the refusal in one place, before the app
runs. It holds at most ``max_bytes`` plus one chunk, which the app would hold anyway:
both users read their JSON bodies whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodySizeLimit", "Refusal"]

#: The answer to a body over the limit, given the limit in bytes; called once per refused
#: request (so it may count the refusal).
Refusal = Callable[[int], Response]


def _declared_length(scope: Scope) -> int | None:
    """The body's declared length, or None when it is not declared by ``Content-Length``
    alone (a ``Transfer-Encoding`` overrides it)."""
    length: int | None = None
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            # A malformed length never reaches an app: the HTTP server refuses it.
            length = int(value) if value.isdigit() else None
    return length


class BodySizeLimit:
    """Refuse, with ``refusal(max_bytes)``, a request whose body exceeds ``max_bytes``,
    declared or streamed, before the app reads it (see the module docstring). Other ASGI
    traffic (lifespan, websockets) passes through untouched."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, refusal: Refusal) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None:
            if declared > self.max_bytes:
                await self.refusal(self.max_bytes)(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        read = await self._read_ahead(receive)
        if read is None:
            await self.refusal(self.max_bytes)(scope, receive, send)
            return

        async def replay() -> Message:
            return read.popleft() if read else await receive()

        await self.app(scope, replay, send)

    async def _read_ahead(self, receive: Receive) -> deque[Message] | None:
        """The body's messages, up to its end or a disconnect; None once past the limit."""
        messages: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages  # http.disconnect: the app sees it as it would have
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return messages
