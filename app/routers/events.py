"""``/api/events``: a server-sent event stream of every change the poller sees.

The stream opens with ``snapshot`` ({workers, status}), then carries ``worker``,
``pause`` and ``load`` events (see :mod:`app.events`), ``router`` when the router stops
or starts again answering (:mod:`app.router_reach`), ``audit`` for each audit record
(:mod:`app.audit_trail`), and a ``: keep-alive`` comment
after each quiet ``keepalive_s``. It ends when the client goes, when the client falls
so far behind that its queue fills (reconnect for a fresh snapshot), or when the app
stops. While the hub's ``max_subscribers`` streams are open, a new one is refused with
503 (``Retry-After``); while the router does not answer, too (``router_unavailable``,
saying since when and why). Tokens go in the ``Authorization`` header only, never in the URL:
browsers read the stream with ``fetch()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.catalogue import command
from app.deps import Hub, Poller, Settings
from app.errors import ApiException, error_responses
from app.events import SubscribersFull, Subscription
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["events"])

#: Seconds a client refused for too many open streams is told to wait: a place frees
#: only when another stream ends.
_FULL_RETRY_AFTER_S = 5

_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "text/event-stream: snapshot, then worker, pause, load, router and "
        "audit events",
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
            # A poll that saw a thousand workers' heartbeats queues a thousand frames;
            # written one by one they outran the writer and the subscriber was dropped.
            yield b"".join([frame, *subscription.waiting()])
    finally:
        hub.unsubscribe(subscription)


@bind(router, command("events"), response_class=StreamingResponse, responses=_STREAM)
async def events(hub: Hub, poller: Poller, settings: Settings) -> StreamingResponse:
    """Every change, as it is seen (the router is polled every ``poll_interval_s``)."""
    await hub.wait_view(settings.control_timeout_s)
    # A snapshot from before the router stopped answering would be stale.
    try:
        opened = hub.subscribe() if poller.router_answers else None
    except SubscribersFull as exc:
        raise ApiException(
            503,
            "too_many_streams",
            f"too many event streams: {exc.limit} are open, the most this admin app serves; "
            "close one or retry later",
            {"Retry-After": str(_FULL_RETRY_AFTER_S)},
        ) from exc
    if opened is None:
        raise ApiException(503, "router_unavailable", poller.reach.refusal(), {"Retry-After": "1"})
    snapshot, subscription = opened
    return StreamingResponse(
        _frames(snapshot, subscription, settings.keepalive_s, hub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
