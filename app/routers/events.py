"""``/api/events``: a server-sent event stream of every change the poller sees.

The stream opens with ``snapshot`` ({workers, status}), then carries ``worker``,
``pause`` and ``load`` events (see :mod:`app.events`) and a ``: keep-alive`` comment
after each quiet ``keepalive_s``. It ends when the client goes, when the client falls
so far behind that its queue fills (reconnect for a fresh snapshot), or when the app
stops. Tokens go in the ``Authorization`` header only, never in the URL: browsers read
the stream with ``fetch()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.catalogue import command
from app.deps import Hub, Poller, Settings
from app.errors import ApiException, error_responses
from app.events import Subscription
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["events"])

_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "text/event-stream: snapshot, then worker, pause and load events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **error_responses(401, 503),
}


async def _frames(
    snapshot: bytes, subscription: Subscription, keepalive_s: float, hub: Hub
) -> AsyncIterator[bytes]:
    try:
        yield snapshot
        while True:
            frame = await subscription.next(keepalive_s)
            if frame is None:
                return
            yield frame
    finally:
        hub.unsubscribe(subscription)


@bind(router, command("events"), response_class=StreamingResponse, responses=_STREAM)
async def events(hub: Hub, poller: Poller, settings: Settings) -> StreamingResponse:
    """Every change, as it is seen (the router is polled every ``poll_interval_s``)."""
    await hub.wait_view(settings.control_timeout_s)
    # A snapshot from before the router stopped answering would be stale.
    opened = hub.subscribe() if poller.router_answers else None
    if opened is None:
        raise ApiException(
            503, "router_unavailable", "no view of the router yet", {"Retry-After": "1"}
        )
    snapshot, subscription = opened
    return StreamingResponse(
        _frames(snapshot, subscription, settings.keepalive_s, hub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
