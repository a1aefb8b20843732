"""Tests for running reads at once: results in order, a failure as its own type, and a
cancellation of the awaiter that a read's own error never hides."""

from __future__ import annotations

import asyncio

import pytest

from app.errors import ApiException
from app.task_groups import both, every

WAIT_S = 10.0


async def answer(value: int, delay_s: float = 0.0) -> int:
    await asyncio.sleep(delay_s)
    return value


async def refuse(delay_s: float = 0.0) -> int:
    await asyncio.sleep(delay_s)
    raise ApiException(503, "router_unavailable", "gone")


class TestResults:
    def test_in_the_order_asked(self) -> None:
        """The slower first coroutine's result still comes first."""

        async def scenario() -> None:
            assert await both(answer(1, 0.02), answer(2)) == (1, 2)
            assert await every(answer(n, 0.01 * (3 - n)) for n in range(3)) == [0, 1, 2]
            assert await every([]) == []

        asyncio.run(scenario())


class TestFailures:
    def test_the_first_error_as_itself_and_the_rest_cancelled(self) -> None:
        """The caller sees the ApiException, not an ExceptionGroup; the slow sibling is
        cancelled, not left running; and the awaiter's cancel count is back where it was
        (Python 3.11's TaskGroup leaves it raised when a child fails during its exit)."""
        slow_cancelled = asyncio.Event()

        async def slow() -> int:
            try:
                await asyncio.sleep(WAIT_S)
            except asyncio.CancelledError:
                slow_cancelled.set()
                raise
            return 0

        async def scenario() -> None:
            with pytest.raises(ApiException) as refused:
                await both(refuse(0.01), slow())
            assert refused.value.status == 503
            assert slow_cancelled.is_set()
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0

        asyncio.run(scenario())

    def test_another_type_passes_unchanged(self) -> None:
        async def broken() -> int:
            raise ValueError("unreadable")

        async def scenario() -> None:
            with pytest.raises(ValueError, match="unreadable"):
                await every([answer(1, 0.01), broken()])

        asyncio.run(scenario())


class TestCancellation:
    def test_a_cancel_wins_over_the_error_it_causes(self) -> None:
        """A read that turns its cancellation into an error (a deadline passing as the
        cancel lands): the awaiter is cancelled all the same."""

        async def times_out_when_cancelled() -> int:
            try:
                await asyncio.sleep(WAIT_S)
            except asyncio.CancelledError:
                raise ApiException(504, "timeout", "no reply in time") from None
            return 0

        async def scenario() -> None:
            task = asyncio.create_task(both(times_out_when_cancelled(), answer(1, WAIT_S)))
            await asyncio.sleep(0.01)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=WAIT_S)
            assert done and task.cancelled()

        asyncio.run(scenario())
