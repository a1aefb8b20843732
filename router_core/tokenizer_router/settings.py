"""How a tokenizer router runs: its endpoints, liveness, barrier and queue limits."""

from __future__ import annotations

from dataclasses import dataclass

from router_core.endpoints import RouterEndpoints
from router_core.transport import DEFAULT_HWM

__all__ = ["RouterSettings"]


@dataclass(frozen=True, kw_only=True)
class RouterSettings:
    """How a tokenizer router runs; every duration in seconds."""

    endpoints: RouterEndpoints
    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float = 5.0
    barrier_timeout_s: float = 5.0
    engine_timeout_s: float = 10.0
    hwm: int = DEFAULT_HWM
    backlog_limit: int = 1000
    drain_timeout_s: float = 2.0
    allow_remote: bool = False

    def __post_init__(self) -> None:
        if self.heartbeat_timeout_s <= self.heartbeat_interval_s:
            raise ValueError("heartbeat_timeout_s must exceed heartbeat_interval_s")
        if min(self.barrier_timeout_s, self.engine_timeout_s, self.drain_timeout_s) < 0:
            raise ValueError("timeouts must not be negative")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")
