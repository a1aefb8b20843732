"""How a detokenizer router runs: its endpoints, stickiness and queue limits."""

from __future__ import annotations

from dataclasses import dataclass

from router_core.detokenizer_router.picker import StickyKey
from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.transport import DEFAULT_HWM

__all__ = ["DetokenizerRouterSettings"]


@dataclass(frozen=True, kw_only=True)
class DetokenizerRouterSettings:
    """How a detokenizer router runs."""

    endpoints: DetokenizerRouterEndpoints
    sticky_key: StickyKey = "worker"
    hwm: int = DEFAULT_HWM
    backlog_limit: int = 1000
    drain_timeout_s: float = 2.0
    allow_remote: bool = False

    def __post_init__(self) -> None:
        if not self.endpoints.detokenizers:
            raise ValueError("need at least one detokenizer endpoint")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")
