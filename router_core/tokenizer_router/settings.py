"""How a tokenizer router runs: its endpoints, liveness, barrier and queue limits.

The flagged fields are the ``switchboard router`` flags (:mod:`router_core.settings_fields`):
their defaults, bounds and help are written here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from router_core.curve import KeyPair, check_control_curve
from router_core.endpoints import RouterEndpoints
from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM
from router_core.settings_fields import flagged

__all__ = ["RouterSettings"]


@dataclass(frozen=True, kw_only=True)
class RouterSettings:
    """How a tokenizer router runs; every duration in seconds."""

    endpoints: RouterEndpoints
    heartbeat_interval_s: float = flagged(
        1.0,
        help="how often a worker should send a heartbeat (told at registration)",
        aliases=("--heartbeat-interval",),
        bound="positive",
    )
    heartbeat_timeout_s: float = flagged(
        5.0,
        help="a worker silent this long is dead; must exceed the heartbeat interval",
        aliases=("--heartbeat-timeout",),
        bound="positive",
    )
    barrier_timeout_s: float = flagged(
        5.0,
        help="how long a pause or continue waits for every acknowledgement, when the "
        "command gives no timeout_s",
        aliases=("--barrier-timeout",),
        bound="positive",
    )
    engine_timeout_s: float = flagged(
        10.0,
        help="the engine counts as live (a barrier participant) this long after its last "
        "acknowledgement or load report",
        aliases=("--engine-timeout",),
        bound="positive",
    )
    hwm: int = DEFAULT_HWM
    backlog_limit: int = DEFAULT_BACKLOG
    drain_timeout_s: float = 2.0
    allow_remote: bool = False
    #: Where the pause state, drain marks and operation counter outlive the process
    #: (``<run dir>/router-state.json`` under ``switchboard up``); None keeps them in
    #: memory only, so a restart forgets them.
    state_file: str | None = None
    #: The stack key every peer must present (``<run dir>/stack.key`` under ``switchboard
    #: up``, :mod:`router_core.credentials`); None: peers are not authenticated, which
    #: ``allow_remote`` refuses.
    key: str | None = field(default=None, repr=False)
    #: CURVE on the control socket, which a ``tcp://`` control endpoint requires: this
    #: router's key pair and the file of client public keys let in (reread on change).
    control_key_pair: KeyPair | None = field(default=None, repr=False)
    control_authorised_keys: str | None = None

    def __post_init__(self) -> None:
        check_control_curve(
            self.endpoints.control, self.control_key_pair, self.control_authorised_keys
        )
        if self.allow_remote and self.key is None:
            raise ValueError(
                "--allow-remote needs a stack key, so that remote peers must prove they "
                "belong to the stack: give --key-file, or --run-dir (stack.key in it)"
            )
        if self.heartbeat_timeout_s <= self.heartbeat_interval_s:
            raise ValueError("heartbeat_timeout_s must exceed heartbeat_interval_s")
        if min(self.barrier_timeout_s, self.engine_timeout_s, self.drain_timeout_s) < 0:
            raise ValueError("timeouts must not be negative")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")
