"""Noticing a client that went away while its request waits or runs without streaming.

A streaming response learns of a disconnect when a send fails (Starlette then cancels
the generator, which aborts the request). A request still waiting for admission (the
stack is paused) or a non-streaming one sends nothing until it ends, so it watches the
connection instead: when the client is gone the work is cancelled, which aborts the
engine request, rather than generating an answer nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

__all__ = ["ClientDisconnected", "unless_disconnected"]

T = TypeVar("T")

#: How often a waiting request checks its connection.
POLL_S = 0.25


class ClientDisconnected(Exception):
    """The client closed the connection before its answer was ready."""


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """The result of ``work``; cancel it and raise :class:`ClientDisconnected` if the
    client disconnects first."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientDisconnected
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
