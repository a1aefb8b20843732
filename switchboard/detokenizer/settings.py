"""How one detokenizer runs: its endpoint, where its text goes, and its limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from router_core.transport import DEFAULT_HWM
from switchboard.text import Tokenizer

__all__ = ["DetokenizerSettings", "OutputsTo"]

#: Where text batches go: straight to each owning worker, or through the tokenizer router.
OutputsTo = Literal["workers", "router"]


@dataclass(frozen=True, kw_only=True)
class DetokenizerSettings:
    """How one detokenizer runs."""

    #: The PULL this detokenizer binds (the detokenizer router's ``detokenizers[j]``).
    endpoint: str
    #: This detokenizer's index j (names it in traces: ``detokenizer-<j>``).
    index: int = 0
    outputs_to: OutputsTo = "workers"
    #: The tokenizer router's ``outputs``; required when ``outputs_to == "router"``.
    router_outputs: str | None = None
    #: A loaded tokenizer; None loads the built-in default in :meth:`Detokenizer.run`.
    tokenizer: Tokenizer | None = None
    hwm: int = DEFAULT_HWM
    backlog_limit: int = 1000
    drain_timeout_s: float = 2.0
    allow_remote: bool = False
    holdback_chars: int = 32
    state_ttl_s: float = 600.0
    max_states: int = 100_000
    evict_interval_s: float = 5.0

    def __post_init__(self) -> None:
        if self.outputs_to not in ("workers", "router"):
            raise ValueError(f"outputs_to must be 'workers' or 'router', not {self.outputs_to!r}")
        if self.outputs_to == "router" and not self.router_outputs:
            raise ValueError("outputs through the router need the router's outputs endpoint")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")
        if self.index < 0:
            raise ValueError("index must be >= 0")
        if self.holdback_chars < 0 or self.state_ttl_s <= 0 or self.max_states <= 0:
            raise ValueError("holdback_chars >= 0, state_ttl_s > 0, max_states > 0 required")
