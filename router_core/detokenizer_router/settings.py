"""How a detokenizer router runs: its endpoints, stickiness and queue limits.

The flagged fields are the ``switchboard detok-router`` flags
(:mod:`router_core.settings_fields`): their defaults and help are written here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from router_core.curve import KeyPair, check_control_curve
from router_core.detokenizer_router.picker import StickyKey
from router_core.endpoints import DetokenizerRouterEndpoints
from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM
from router_core.settings_fields import flagged

__all__ = ["DetokenizerRouterSettings"]


@dataclass(frozen=True, kw_only=True)
class DetokenizerRouterSettings:
    """How a detokenizer router runs."""

    endpoints: DetokenizerRouterEndpoints
    # flagged() is dataclasses.field() with metadata: the default is the string below.
    sticky_key: StickyKey = flagged(
        "worker",
        help="worker: each worker to the least-used detokenizer when first seen; "
        "worker-crc32: crc32(worker address) % M, as the seed; request: crc32(rid) % M",
    )
    hwm: int = DEFAULT_HWM
    backlog_limit: int = DEFAULT_BACKLOG
    drain_timeout_s: float = 2.0
    allow_remote: bool = False
    #: Where the ``worker`` assignment outlives the process (``<run dir>/
    #: detok-router-state.json`` under ``switchboard up``); None: a restart assigns afresh.
    state_file: str | None = None
    #: The tokenizer router's workers endpoint, told this router's incarnation each
    #: second (None: no beacon).
    router_workers: str | None = None
    #: The stack key its beacons carry (:mod:`router_core.credentials`; None: none).
    key: str | None = field(default=None, repr=False)
    #: CURVE on the control socket, which a ``tcp://`` control endpoint requires
    #: (:func:`router_core.curve.check_control_curve`).
    control_key_pair: KeyPair | None = field(default=None, repr=False)
    control_authorised_keys: str | None = None

    def __post_init__(self) -> None:
        check_control_curve(
            self.endpoints.control, self.control_key_pair, self.control_authorised_keys
        )
        if not self.endpoints.detokenizers:
            raise ValueError("need at least one detokenizer endpoint")
        if self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("hwm and backlog_limit must be positive (bounded queues)")
