"""Whether the admin app reaches the router, since when, and why not.

Pure. :class:`RouterReach` is told the outcome of each of the poller's reads
(:meth:`~RouterReach.answered`, :meth:`~RouterReach.failed`) and says when that changed
the picture, so the poller logs and announces only the changes: one ``router`` event
(:class:`RouterEvent`) on ``/api/events`` when the router stops answering, one when it
answers again. ``since`` is the wall-clock time the first read that failed was sent (or
the first read that answered again was), ``error`` the latest failure's message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, Field

__all__ = ["RouterEvent", "RouterReach"]


class RouterEvent(BaseModel):
    """The ``router`` event: the router stopped answering the admin app, or answers again."""

    reachable: bool = Field(description="whether the router answers the admin app's reads")
    since: float = Field(description="Unix time it stopped (or started again) answering")
    error: str | None = Field(description="why the latest read failed; null while reachable")


@dataclass
class RouterReach:
    """The outcome of the latest reads (``reachable`` None before the first one)."""

    reachable: bool | None = None
    since: float = 0.0
    error: str | None = None

    def answered(self, sent_at: float) -> bool:
        """The read sent at ``sent_at`` (Unix time) was answered; whether that is news
        (the router was unreachable before)."""
        news = self.reachable is False
        if self.reachable is not True:
            self.reachable, self.since, self.error = True, sent_at, None
        return news

    def failed(self, sent_at: float, error: str) -> bool:
        """The read sent at ``sent_at`` failed with ``error``; whether that is news (the
        router answered before, or this is the first read)."""
        self.error = error
        if self.reachable is False:
            return False
        self.reachable, self.since = False, sent_at
        return True

    def event(self) -> RouterEvent:
        return RouterEvent(reachable=self.reachable is True, since=self.since, error=self.error)

    def refusal(self) -> str:
        """Why there is no view of the stack, for a client asking for one."""
        if self.reachable is not False:
            return "no view of the router yet"
        when = datetime.fromtimestamp(self.since, UTC).isoformat(timespec="seconds")
        return f"the router does not answer the admin app (since {when}): {self.error}"
