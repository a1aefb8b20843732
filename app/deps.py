"""What route handlers get injected, as ``Annotated`` aliases.

``Viewer`` and ``Operator`` authenticate the request (``Authorization: Bearer <token>``)
and give the :class:`Principal`: no token or an unknown one is a 401, a viewer's token
where an operator's is needed a 403. ``MetricsReader`` is ``Viewer`` when
:attr:`AdminSettings.metrics_need_token`, else nobody (None). ``Router``, ``Hub``,
``Poller``, ``Settings`` and ``Metrics`` are the lifespan's objects; ``Note`` is the
request's :class:`~app.audit.AuditNote`, where a mutation's handler writes its account.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.audit import AuditNote
from app.auth import authorize
from app.events import EventHub
from app.guard import AUDIT_NOTE_KEY
from app.metrics import HostMetrics
from app.poller import EventPoller
from app.router_api import RouterApi
from app.settings import AdminSettings
from app.state import AdminState
from app.tokens import Principal

__all__ = [
    "Hub",
    "Metrics",
    "MetricsReader",
    "Note",
    "Operator",
    "Poller",
    "Router",
    "Settings",
    "Viewer",
]

#: Documents bearer auth in the OpenAPI schema; checking is ours (one error shape).
_bearer = HTTPBearer(auto_error=False, description="a viewer's or an operator's token")


def _state(request: Request) -> AdminState:
    state: AdminState = request.app.state.admin
    return state


def _principal(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return authorize(
        _state(request).settings.tokens, request.headers.get("authorization"), "viewer"
    )


def _operator(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return authorize(
        _state(request).settings.tokens, request.headers.get("authorization"), "operator"
    )


def _metrics_reader(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal | None:
    if not _state(request).settings.metrics_need_token:
        return None
    return _principal(request, _)


def _audit_note(request: Request) -> AuditNote:
    # MutationGuard puts one in every audited request's scope; a request it did not see
    # (an app built without it, in a test) gets one nobody reads.
    note = request.scope.get("state", {}).get(AUDIT_NOTE_KEY)
    return note if isinstance(note, AuditNote) else AuditNote()


def _metrics(request: Request) -> HostMetrics:
    return _state(request).metrics


def _router(request: Request) -> RouterApi:
    return _state(request).router


def _hub(request: Request) -> EventHub:
    return _state(request).hub


def _poller(request: Request) -> EventPoller:
    return _state(request).poller


def _settings(request: Request) -> AdminSettings:
    return _state(request).settings


Viewer = Annotated[Principal, Depends(_principal)]
MetricsReader = Annotated[Principal | None, Depends(_metrics_reader)]
Metrics = Annotated[HostMetrics, Depends(_metrics)]
Operator = Annotated[Principal, Depends(_operator)]
Router = Annotated[RouterApi, Depends(_router)]
Hub = Annotated[EventHub, Depends(_hub)]
Poller = Annotated[EventPoller, Depends(_poller)]
Settings = Annotated[AdminSettings, Depends(_settings)]
Note = Annotated[AuditNote, Depends(_audit_note)]
