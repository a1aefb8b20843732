"""Workers for the registry tests: registrations and bare records in a given state."""

from __future__ import annotations

from typing import get_args

from router_core.registry import WorkerRecord, WorkerState
from router_core.wire.control import WorkerRegistration

__all__ = ["STATES", "TIMEOUT", "record_in", "registration"]

STATES: tuple[WorkerState, ...] = get_args(WorkerState)

#: Timeout and clock values that are exact in binary floating point, so the boundary is exact.
TIMEOUT = 2.0


def registration(
    worker_id: str = "w1", address: str = "ipc:///run/w1", **extra: object
) -> WorkerRegistration:
    """A registration for ``worker_id`` at ``address``."""
    return WorkerRegistration(worker_id=worker_id, address=address, **extra)  # type: ignore[arg-type]


def record_in(state: WorkerState) -> WorkerRecord:
    """A bare record already in ``state``."""
    return WorkerRecord(
        worker_id="w",
        address="ipc:///run/w",
        pid=1,
        host="h",
        version="v",
        started_ns=0,
        registered_at=0.0,
        last_seen=0.0,
        state=state,
    )
