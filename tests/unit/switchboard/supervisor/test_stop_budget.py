"""A stop's budget (switchboard.supervisor.stop_budget): the drain, the workers and the
rest share stop_grace_s so that the whole stop ends within it; the settings refuse a
grace too short for the workers' graceful timeout."""

from __future__ import annotations

import pytest

from switchboard.supervisor.settings import SettingsError, load_settings
from switchboard.supervisor.stop_budget import (
    MIN_STEP_S,
    STOP_RESERVE_S,
    WORKER_EXIT_S,
    StopBudget,
)


def budget(grace: float = 28.0, drain: float = 30.0, graceful: float = 10.0) -> StopBudget:
    return StopBudget.starting(
        100.0,
        grace_s=grace,
        drain_timeout_s=drain,
        graceful_timeout_s=graceful,
        stop_timeout_s=10.0,
    )


def test_the_drain_leaves_the_workers_their_graceful_time() -> None:
    """Defaults: 28 - 10 - 1.5 - 3 = 13.5 s of drain, though drain_timeout_s says 30."""
    assert budget().drain_s(100.0) == 28.0 - 10.0 - WORKER_EXIT_S - STOP_RESERVE_S == 13.5
    assert budget(drain=5.0).drain_s(100.0) == 5.0
    assert budget().drain_s(130.0) == 0.0


def test_every_step_ends_by_the_deadline() -> None:
    """Drain to its limit, workers to theirs, then the rest: the last SIGKILL comes at
    the deadline, never after (but each step gets its minimum)."""
    plan = budget()
    now = 100.0 + plan.drain_s(100.0)
    workers = plan.group_s("worker", now)
    assert workers == 10.0 + WORKER_EXIT_S  # stop_timeout_s + graceful_timeout_s: 20
    now += workers
    assert now == plan.deadline - STOP_RESERVE_S
    rest = plan.group_s("engine", now)
    assert rest == STOP_RESERVE_S
    assert plan.group_s("router", plan.deadline + 5) == MIN_STEP_S


def test_a_quick_stop_keeps_the_configured_timeouts() -> None:
    """Early in the budget a group gets its own timeout, not more."""
    plan = budget(grace=120.0)
    assert plan.group_s("worker", 100.0) == 20.0
    assert plan.group_s("detokenizer", 100.0) == 10.0


def test_a_grace_too_short_for_the_workers_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"stop_grace_s \(8\) must be at least 8.5"):
        load_settings({"stop_grace_s": 8, "graceful_timeout_s": 4})
    assert load_settings({"stop_grace_s": 8.5, "graceful_timeout_s": 4}).stop_grace_s == 8.5
