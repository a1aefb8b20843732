"""Run a few reads at once in an :class:`asyncio.TaskGroup` and fail as one call would.

:func:`both` and :func:`every` await their coroutines together and return their results
in order. They differ from ``asyncio.gather`` and from a bare ``TaskGroup`` in three ways
a caller can rely on:

* A failure is the first failed coroutine's own exception (an ``ApiException`` stays an
  ``ApiException``), not an ``ExceptionGroup``: callers catch specific types. The
  others' errors are dropped: once one fails the rest are cancelled, so theirs follow
  from it.
* When one fails the others are cancelled and awaited, so none outlives the call.
* A cancellation of the awaiting task is never swallowed: if it was cancelled while the
  coroutines ran, it gets ``CancelledError`` even when a coroutine ended with an error
  of its own (a read whose deadline passes as the cancel lands). ``gather`` and
  ``TaskGroup`` both hand over that error instead, and a loop catching it would go on
  for ever after it was asked to stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ["both", "every"]

A = TypeVar("A")
B = TypeVar("B")
T = TypeVar("T")


async def both(first: Coroutine[Any, Any, A], second: Coroutine[Any, Any, B]) -> tuple[A, B]:
    """The results of ``first`` and ``second``, run at once (see the module docstring)."""
    one, two = await _finished([first, second])
    return one.result(), two.result()


async def every(calls: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """The results of ``calls`` in their order, run at once (see the module docstring)."""
    return [task.result() for task in await _finished(list(calls))]


async def _finished(calls: list[Coroutine[Any, Any, Any]]) -> list[asyncio.Task[Any]]:
    """``calls`` as tasks that all succeeded; else the first error, or CancelledError."""
    awaiter = asyncio.current_task()
    assert awaiter is not None, "called outside a task"
    cancels = awaiter.cancelling()
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
            if tasks:
                # Wait in the group's body, not in its exit: on Python 3.11 a task failing
                # while the group exits leaves the awaiter's cancel count raised for good
                # (cpython#116720), and a later cancelling() check would then misfire.
                await asyncio.wait(tasks)
    except ExceptionGroup as errors:
        # Unwrapped on purpose: callers catch the type a single call raises.
        failed = errors.exceptions[0]
    if failed is None:
        return tasks
    if awaiter.cancelling() > cancels:
        # Cancelled from outside meanwhile: that comes first; the error followed from it.
        raise asyncio.CancelledError
    raise failed
