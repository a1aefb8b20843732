"""The shared bounded polling helpers (``tests.support.eventually``)."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from tests.support import eventually as polling
from tests.support.eventually import PollTimeout, eventually, wait_until


class Probe:
    """A predicate answering from a script of values, counting its calls."""

    def __init__(self, *values: object) -> None:
        self.values = itertools.chain(values, itertools.repeat(values[-1]))
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        return next(self.values)


class TestWaitUntil:
    """wait_until: the first truthy value, or a failure that explains itself."""

    def test_returns_the_first_truthy_value(self) -> None:
        """The value the predicate first gives that is truthy is returned, at once."""
        probe = Probe(None, 0, [], "ready", "later")
        assert wait_until(probe, 5.0, "ready", interval=0.001) == "ready"
        assert probe.calls == 4

    def test_deadline_fails_naming_what_and_the_last_value(self) -> None:
        """Past the deadline it raises an AssertionError with the awaited thing and the
        last value seen."""
        started = time.monotonic()
        with pytest.raises(PollTimeout) as failure:
            wait_until(Probe(0, None, []), 0.1, "the queue to fill", interval=0.01)
        assert time.monotonic() - started < 2.0
        assert isinstance(failure.value, AssertionError)
        assert "waiting for: the queue to fill; last value: []" in str(failure.value)

    def test_message_callable_is_asked_at_failure(self) -> None:
        """A callable message is evaluated when the wait fails, with the state by then."""
        seen: list[int] = []
        with pytest.raises(PollTimeout, match="3 seen"):
            wait_until(lambda: seen.append(1), 1.0, lambda: f"{len(seen)} seen", attempts=3)

    def test_attempts_bound_a_clock_that_does_not_move(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With time standing still the attempt count ends the wait: by default the
        attempts the deadline allows at the interval."""
        monkeypatch.setattr(polling, "monotonic", lambda: 100.0)
        probe = Probe(False)
        with pytest.raises(PollTimeout, match="and 6 attempts"):
            wait_until(probe, 0.05, "never", interval=0.01)
        assert probe.calls == 6
        probe = Probe(False)
        with pytest.raises(PollTimeout, match="and 2 attempts"):
            wait_until(probe, 10.0, "never", interval=0.001, attempts=2)
        assert probe.calls == 2

    def test_retry_on_counts_an_exception_as_not_yet(self) -> None:
        """An exception of a listed type is a failed attempt (shown as the last value);
        any other propagates at once."""
        errors = iter([ConnectionError("refused"), ConnectionError("refused")])

        def connects() -> str:
            for error in errors:
                raise error
            return "connected"

        assert wait_until(connects, 5.0, retry_on=(ConnectionError,), interval=0.001) == (
            "connected"
        )
        with pytest.raises(PollTimeout, match=r"last value: ConnectionError\('down'\)"):
            wait_until(_raise(ConnectionError("down")), 0.05, retry_on=(ConnectionError,))
        with pytest.raises(KeyError):
            wait_until(_raise(KeyError("x")), 5.0, retry_on=(ConnectionError,))

    @pytest.mark.parametrize(
        ("timeout", "interval", "attempts"), [(-1, 0.1, None), (1, -0.1, None), (1, 0.1, 0)]
    )
    def test_bounds_are_checked(
        self, timeout: float, interval: float, attempts: int | None
    ) -> None:
        """A negative timeout, a negative interval or no attempts is refused."""
        with pytest.raises(ValueError):
            wait_until(lambda: True, timeout, interval=interval, attempts=attempts)


class TestNoInterval:
    """Interval 0 retries at once, still bounded by the deadline and a count."""

    def test_zero_interval_retries_until_true(self) -> None:
        """A probe true on its third call is returned without sleeping between calls."""
        calls = iter([None, None, "ok"])
        assert wait_until(lambda: next(calls), 1.0, "ok", 0) == "ok"

    def test_zero_interval_is_bounded_by_count(self) -> None:
        """A never-true probe at interval 0 stops after one attempt per ms of deadline."""
        made = []
        with pytest.raises(PollTimeout):
            wait_until(lambda: made.append(1), 0.01, "never", 0)
        assert 1 <= len(made) <= 11


def _raise(error: Exception) -> object:
    def probe() -> object:
        raise error

    return probe


class TestEventually:
    """eventually: the same contract inside an event loop, other tasks running."""

    def test_awaits_a_coroutine_predicate(self) -> None:
        """A coroutine function is awaited at each attempt; its first truthy value returns."""
        probe = Probe(None, None, 7)

        async def ready() -> object:
            await asyncio.sleep(0)
            return probe()

        assert asyncio.run(eventually(ready, 5.0, "seven", interval=0.001)) == 7
        assert probe.calls == 3

    def test_other_tasks_run_while_it_waits(self) -> None:
        """A plain predicate waiting for another task's work sees it done."""

        async def scenario() -> bool:
            done = asyncio.Event()
            asyncio.get_running_loop().call_later(0.05, done.set)
            return await eventually(done.is_set, 5.0, "the timer")

        assert asyncio.run(scenario()) is True

    def test_deadline_fails_naming_what_and_the_last_value(self) -> None:
        """Past the deadline it raises PollTimeout with the awaited thing and last value."""
        with pytest.raises(PollTimeout, match=r"waiting for: a reply; last value: \{\}"):
            asyncio.run(eventually(dict, 0.05, "a reply", interval=0.01))
