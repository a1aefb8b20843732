"""``drain --wait`` (switchboard.admin_cli.drain_wait): progress lines when what the
worker holds changes, the answer once it is safe to delete, and a failure naming what it
still holds when the wait passes or the drain ends another way."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, cast

import pytest

from switchboard.admin_cli.client import AdminClient
from switchboard.admin_cli.drain_wait import wait_until_safe
from switchboard.admin_cli.errors import OperationFailed


class Reads:
    """The admin API's answers to ``GET /api/workers/w1``, one per read, and a clock that
    moves by one poll per sleep."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self._answers: Iterator[dict[str, Any]] = iter(answers)
        self.paths: list[str] = []
        self.now = 0.0

    def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        return next(self._answers)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def worker(state: str, inflight: int, safe: bool = False) -> dict[str, Any]:
    return {"id": "w1", "state": state, "inflight": inflight, "safe_to_delete": safe}


def run(reads: Reads, wait_s: float = 30.0) -> tuple[Any, str]:
    out = io.StringIO()
    body = wait_until_safe(
        cast(AdminClient, reads), "w1", wait_s, out=out, clock=lambda: reads.now, sleep=reads.sleep
    )
    return body, out.getvalue()


def test_progress_until_safe() -> None:
    """A line per change of what it holds, none for a read that changed nothing."""
    reads = Reads(
        [
            worker("draining", 3),
            worker("draining", 3),
            worker("draining", 1),
            worker("drained", 0, True),
        ]
    )
    body, out = run(reads)
    assert body["safe_to_delete"] is True
    assert out.splitlines() == [
        "w1: draining, 3 in flight",
        "w1: draining, 1 in flight",
        "w1: drained, safe to delete",
    ]
    assert set(reads.paths) == {"/api/workers/w1"}


def test_times_out_naming_what_it_holds() -> None:
    reads = Reads([worker("draining", 2)] * 10)
    with pytest.raises(
        OperationFailed, match=r"not safe to delete after 2 s \(w1: draining, 2 in flight\)"
    ):
        run(reads, wait_s=2.0)


def test_undrained_meanwhile_fails_at_once() -> None:
    reads = Reads([worker("draining", 2), worker("serving", 2)])
    with pytest.raises(OperationFailed, match="w1 is serving: it is no longer draining"):
        run(reads)
