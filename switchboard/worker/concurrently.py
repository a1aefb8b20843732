"""Running a request's parts together: the first failure cancels the rest.

A batch request (several prompts, or ``n`` choices) is several generations; these two
helpers run them concurrently, whole (:func:`run_all`) or streamed
(:func:`merge_streams`), and raise the first failure as itself so the HTTP error
handlers see it. Pure asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["merge_streams", "run_all"]

T = TypeVar("T")


async def run_all(calls: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``calls`` concurrently; their results in order.

    The first failure cancels the rest and is raised as itself (not wrapped in an
    exception group), so the HTTP error handlers see it.
    """
    if len(calls) == 1:
        return [await calls[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]


async def merge_streams(
    streams: Sequence[AsyncGenerator[T, None]],
) -> AsyncGenerator[tuple[int, T], None]:
    """Items of several async generators as they come, tagged with the generator's index.

    An exception in one generator cancels the others and is raised; leaving early closes
    them all (so their requests are aborted).
    """
    if len(streams) == 1:
        async with contextlib.aclosing(streams[0]) as only:
            async for item in only:
                yield 0, item
        return
    queue: asyncio.Queue[_Tagged[T]] = asyncio.Queue()

    async def pump(index: int, source: AsyncGenerator[T, None]) -> None:
        try:
            async with contextlib.aclosing(source) as items:
                async for item in items:
                    await queue.put(_Tagged(index, item))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put(_Tagged(index, None, error))
        else:
            await queue.put(_Tagged(index, None, None, done=True))

    tasks = [asyncio.create_task(pump(i, source)) for i, source in enumerate(streams)]
    try:
        remaining = len(tasks)
        while remaining:
            entry = await queue.get()
            if entry.error is not None:
                raise entry.error
            if entry.done:
                remaining -= 1
            else:
                yield entry.index, entry.item  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(slots=True)
class _Tagged(Generic[T]):
    index: int
    item: T | None
    error: Exception | None = None
    done: bool = False
