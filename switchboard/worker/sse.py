"""Server-sent events as LLM servers send them: ``data: <json>\\n\\n``, ending ``data: [DONE]``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Final

import msgspec
from fastapi.responses import StreamingResponse

__all__ = ["DONE", "event", "sse_response"]

#: The last event of every stream.
DONE: Final = b"data: [DONE]\n\n"

_ENCODER: Final = msgspec.json.Encoder()


def event(payload: Any) -> bytes:
    """One ``data:`` event carrying ``payload`` as JSON."""
    return b"data: " + _ENCODER.encode(payload) + b"\n\n"


def sse_response(events: AsyncGenerator[bytes, None] | AsyncIterator[bytes]) -> StreamingResponse:
    """A streaming response of ``events`` with the headers proxies need to pass it through."""
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
