"""Authorization before the body, and one audit record per mutation attempt.

:class:`MutationGuard` is plain ASGI middleware in front of the audited commands (every
path and alias of :mod:`app.catalogue`'s audited entries, by method). For such a request:

* the token is checked from the headers alone, before the body is read (FastAPI reads a
  body before it runs a route's dependencies): no token, an unknown one or a viewer's is
  answered 401/403 at once, without a call to ``receive``; when a body is on its way
  the answer says ``Connection: close``, so the server drops the connection instead of
  reading the rest of it;
* otherwise the request goes on (to the body limit, validation and the handler), and
  whatever it is answered, one audit record is written when it ends (see
  :mod:`app.audit`): the status sent, the error code and message of an error answer
  (read from its body, at most :data:`_ERROR_BODY_LIMIT` bytes of it), and the
  handler's account from its :class:`~app.audit.AuditNote` (before the error message,
  if both). A request that raises or is cancelled before
  answering is recorded ``error`` too, and the exception goes on.

Every other request passes through untouched: reads are not audited.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.audit import AuditNote, audit
from app.auth import authenticate, permit
from app.catalogue import COMMANDS, Command
from app.errors import ApiException
from app.tokens import Principal, TokenTable
from httpkit.spans import server_traceparent
from router_core.audit import AuditLog

__all__ = ["AUDIT_NOTE_KEY", "MutationGuard", "audited_route"]

#: Where an audited request's :class:`AuditNote` is kept in ``scope["state"]``.
AUDIT_NOTE_KEY: Final = "switchboard_audit_note"
#: How much of an error answer's body is read for its code and message.
_ERROR_BODY_LIMIT: Final = 8192


@dataclass(frozen=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    entry: Command


def _pattern(path: str) -> re.Pattern[str]:
    """A route path (``/api/workers/{worker_id}/drain``) as the regex Starlette's default
    ``str`` converter matches it with: one non-empty segment per ``{name}``."""
    parts = re.split(r"\{(\w+)\}", path)
    regex = "".join(
        re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)"
        for index, part in enumerate(parts)
    )
    return re.compile(regex)


def _routes() -> Iterator[_Route]:
    for entry in COMMANDS:
        if entry.audited:
            for path in entry.paths:
                yield _Route(entry.method, _pattern(path), entry)


_AUDITED: Final = tuple(_routes())


def audited_route(method: str, path: str) -> tuple[Command, str] | None:
    """The audited command served at ``method path`` and its target (the worker's id, or
    ``all``), or None for a request that is not a mutation."""
    for route in _AUDITED:
        if route.method == method:
            match = route.pattern.fullmatch(path)
            if match is not None:
                return route.entry, match.groupdict().get("worker_id", "all")
    return None


def _route_path(scope: Scope) -> str:
    """The path the app's routes match: without the ``root_path`` a proxy mounts it at."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _body_pending(scope: Scope) -> bool:
    """Whether the request declares a body (a non-zero length, or chunks)."""
    if _header(scope, b"transfer-encoding") is not None:
        return True
    length = _header(scope, b"content-length")
    return length is not None and length.strip() not in ("", "0")


def _client(scope: Scope) -> str | None:
    peer = scope.get("client")
    if not peer:
        return None
    host, port = peer
    return f"{host}:{port}"


def _trace_id() -> str | None:
    parent = server_traceparent()
    return parent.split("-")[1] if parent.count("-") == 3 else None


def _error_of(status: int, body: bytes) -> tuple[str | None, str | None]:
    """The error code and message of an error answer in the app's shape, if it is one."""
    try:
        error = json.loads(body).get("error")
        return str(error["code"]), str(error["message"])
    except (ValueError, AttributeError, KeyError, TypeError):
        return f"http_{status}", None


class MutationGuard:
    """Decide a mutation's authorization before its body, and audit every attempt (see
    the module docstring). ``tokens`` are the app's; records go to ``audit_log``."""

    def __init__(self, app: ASGIApp, *, tokens: TokenTable, audit_log: AuditLog) -> None:
        self.app = app
        self.tokens = tokens
        self.audit_log = audit_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = audited_route(scope["method"], _route_path(scope))
        if found is None:
            await self.app(scope, receive, send)
            return
        entry, target = found
        record: dict[str, Any] = {"target": target, "client": _client(scope)}
        principal: Principal | None = None
        try:
            principal = authenticate(self.tokens, _header(scope, b"authorization"))
            permit(principal, entry.role)
        except ApiException as refusal:
            await self._refuse(refusal, scope, receive, send)
            audit(
                self.audit_log,
                entry,
                who=None if principal is None else principal.name,
                status=refusal.status,
                reason=refusal.code,
                detail=refusal.message,
                trace_id=_trace_id(),
                **record,
            )
            return
        note = AuditNote(who=principal.name)
        scope.setdefault("state", {})[AUDIT_NOTE_KEY] = note
        status: int | None = None
        error_body = bytearray()

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and status is not None and status >= 400:
                room = _ERROR_BODY_LIMIT - len(error_body)
                if room > 0:
                    error_body.extend(message.get("body", b"")[:room])
            await send(message)

        reason = detail = None
        try:
            await self.app(scope, receive, observed)
        except BaseException as exc:
            if isinstance(exc, Exception):
                # Starlette's outermost middleware answers it 500, if nothing was sent yet.
                status = 500 if status is None else status
                reason = "internal_error"
            else:
                reason = "cancelled"
            detail = f"the request ended before it was answered ({type(exc).__name__})"
            raise
        finally:
            if status is not None and status >= 400 and reason is None:
                reason, detail = _error_of(status, bytes(error_body))
            audit(
                self.audit_log,
                entry,
                who=principal.name,
                status=status,
                reason=reason,
                detail="; ".join(part for part in (note.detail, detail) if part) or None,
                trace_id=_trace_id(),
                **record,
            )

    async def _refuse(
        self, refusal: ApiException, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Answer ``refusal`` without reading the body; close the connection after it
        when a body is still to come, so no more of it is read."""
        if _body_pending(scope):
            refusal.headers = {**(refusal.headers or {}), "Connection": "close"}
        await refusal.response()(scope, receive, send)
