"""How one detokenizer runs: its endpoint, where its text goes, and its limits.

The flagged fields are ``switchboard detokenizer`` flags (:mod:`router_core.settings_fields`):
their defaults, bounds and help are written here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM
from router_core.settings_fields import flagged
from switchboard.text import TextCodec

__all__ = ["DetokenizerSettings", "OutputsTo"]

#: Where text batches go: straight to each owning worker, or through the tokenizer router
#: (``--outputs-via direct`` and ``--outputs-via router``).
OutputsTo = Literal["workers", "router"]


@dataclass(frozen=True, kw_only=True)
class DetokenizerSettings:
    """How one detokenizer runs."""

    #: The PULL this detokenizer binds (the detokenizer router's ``detokenizers[j]``).
    endpoint: str
    #: This detokenizer's index j (names it in traces: ``detokenizer-<j>``).
    index: int = flagged(0, help="this detokenizer's index j, below --count", bound="non_negative")
    outputs_to: OutputsTo = "workers"
    #: The tokenizer router's ``outputs``; required when ``outputs_to == "router"``.
    router_outputs: str | None = None
    #: The tokenizer router's workers endpoint, told this detokenizer's incarnation each
    #: second (None: no beacon).
    router_workers: str | None = None
    #: The stack key its beacons carry (:mod:`router_core.credentials`; None: none).
    key: str | None = field(default=None, repr=False)
    #: A loaded tokenizer; None loads the built-in default in :meth:`Detokenizer.run`.
    tokenizer: TextCodec | None = None
    hwm: int = DEFAULT_HWM
    backlog_limit: int = DEFAULT_BACKLOG
    drain_timeout_s: float = 2.0
    allow_remote: bool = False
    holdback_chars: int = flagged(
        32,
        help="characters held back per request so a stop string spanning steps is trimmed",
        bound="non_negative",
    )
    state_ttl_s: float = flagged(
        600.0,
        help="seconds after which an idle request's state is forgotten",
        aliases=("--state-ttl",),
        bound="positive",
    )
    max_states: int = flagged(100_000, help="open requests kept at most", bound="positive")
    destination_idle_s: float = flagged(
        60.0,
        help="seconds after which the socket to a worker sent nothing, with no open request "
        "of that worker, is closed (what it still queues is dropped and counted)",
        bound="positive",
    )
    max_destinations: int = flagged(
        256,
        help="sockets to workers kept at most (the longest idle is closed first)",
        bound="positive",
    )
    evict_interval_s: float = flagged(
        5.0,
        help="seconds between sweeps for idle request states and idle worker sockets",
        bound="positive",
    )

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
        if self.destination_idle_s <= 0 or self.max_destinations <= 0:
            raise ValueError("destination_idle_s > 0 and max_destinations > 0 required")
        if self.evict_interval_s <= 0:
            raise ValueError("evict_interval_s must be > 0")
