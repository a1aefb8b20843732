"""Bounded polling: wait for a condition to hold, never sleep and hope.

:func:`wait_until` (blocking) and :func:`eventually` (``async``, letting other tasks run
between attempts) call a probe until it returns something truthy and return that. Both
are bounded twice: by a deadline, and by an attempt count (by default the attempts the
deadline allows at ``interval``, so a clock that does not move, or a probe that never
blocks, still ends). The failure names what was awaited, how long and how often it was
tried, and the last value the probe gave, so a timeout explains itself.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from time import monotonic, sleep
from typing import TypeVar

__all__ = ["PollTimeout", "eventually", "wait_until"]

T = TypeVar("T")

#: Seconds between attempts unless the caller says otherwise.
DEFAULT_INTERVAL_S = 0.02

#: What the attempt-count bound assumes one attempt takes when ``interval`` is 0.
_SHORTEST_ATTEMPT_S = 0.001


class PollTimeout(AssertionError):
    """A condition did not hold within its bounds (an assertion failure of the test)."""


class _Attempts:
    """The bookkeeping of one wait: bounds, attempts made, the last value seen."""

    def __init__(
        self,
        timeout: float,
        interval: float,
        attempts: int | None,
        retry_on: tuple[type[Exception], ...],
    ) -> None:
        if timeout < 0 or interval < 0:
            raise ValueError(f"need timeout >= 0 and interval >= 0, got {timeout}, {interval}")
        self.timeout = timeout
        self.interval = interval
        # Interval 0 tries again at once (a probe that makes a request takes time of its
        # own); the count bound then allows one attempt per millisecond of the deadline.
        per_attempt = max(interval, _SHORTEST_ATTEMPT_S)
        self.limit = attempts if attempts is not None else math.ceil(timeout / per_attempt) + 1
        if self.limit < 1:
            raise ValueError(f"need at least one attempt, got {attempts}")
        self.retry_on = retry_on
        self.started = monotonic()
        self.made = 0
        self.last: object = None

    def record(self, value: object) -> None:
        self.made += 1
        self.last = value

    def exhausted(self) -> bool:
        return self.made >= self.limit or monotonic() - self.started >= self.timeout

    def failure(self, message: str | Callable[[], str]) -> PollTimeout:
        what = message() if callable(message) else message
        elapsed = monotonic() - self.started
        return PollTimeout(
            f"timed out after {elapsed:.1f}s (limit {self.timeout:.1f}s) and {self.made} "
            f"attempts waiting for: {what}; last value: {self.last!r}"
        )


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    message: str | Callable[[], str] = "condition",
    interval: float = DEFAULT_INTERVAL_S,
    *,
    attempts: int | None = None,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Sleeps ``interval`` between attempts. An exception of a type in ``retry_on`` counts as
    a failed attempt (its repr is the value seen); any other propagates. Raises
    :class:`PollTimeout` naming ``message`` once ``timeout`` seconds or ``attempts``
    attempts have passed.
    """
    state = _Attempts(timeout, interval, attempts, retry_on)
    while True:
        try:
            value = predicate()
        except retry_on as error:
            state.record(error)
        else:
            state.record(value)
            if value:
                return value
        if state.exhausted():
            raise state.failure(message)
        sleep(interval)


async def eventually(
    predicate: Callable[[], T | Awaitable[T | None] | None],
    timeout: float,
    message: str | Callable[[], str] = "condition",
    interval: float = DEFAULT_INTERVAL_S,
    *,
    attempts: int | None = None,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """:func:`wait_until` for a running event loop: ``predicate`` may be a coroutine
    function, and other tasks run while it waits between attempts."""
    state = _Attempts(timeout, interval, attempts, retry_on)
    while True:
        try:
            outcome = predicate()
            value = await outcome if inspect.isawaitable(outcome) else outcome
        except retry_on as error:
            state.record(error)
        else:
            state.record(value)
            if value:
                return value
        if state.exhausted():
            raise state.failure(message)
        await asyncio.sleep(interval)
