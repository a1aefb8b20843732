"""How a worker link connects: its return address and the router's endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from router_core.curve import ClientKeys
from router_core.endpoints import RouterEndpoints, check_endpoint, worker_address
from router_core.limits import DEFAULT_HWM
from router_core.settings_fields import flagged

__all__ = ["WorkerLinkSettings"]


@dataclass(frozen=True, kw_only=True)
class WorkerLinkSettings:
    """Endpoints and limits of one worker's link.

    ``address`` is the PULL the worker binds (its identity on the wire);
    ``requests_endpoint`` and ``workers_endpoint`` are the router's two PULLs.

    With ``curve`` the worker runs on a host of its own
    (:mod:`~router_core.worker_link.remote_sockets`): ``workers_endpoint`` and
    ``requests_endpoint`` are then the worker gateway's control and requests endpoints,
    and ``address`` is the return address the gateway keeps for the worker on the control
    host (its prefix and the worker id); the worker binds nothing.
    """

    address: str
    requests_endpoint: str
    workers_endpoint: str
    hwm: int = DEFAULT_HWM
    #: Resend a registration that got no reply within this long.
    register_retry_s: float = 1.0
    #: How long a request waits for admission while the router has not accepted us.
    register_wait_s: float = 10.0
    #: How long a request send waits while the router cannot take it.
    send_timeout_s: float = 30.0
    #: A request with no output for this long while not paused ends with an error
    #: (``idle_timeout``): the last resort when its final row was lost.
    idle_timeout_s: float = flagged(
        60.0,
        help="a request with no output for this long while not paused ends with a 503 "
        "(idle_timeout): the bound on a request whose last output was lost",
        bound="positive",
    )
    #: After an output-path process restarted, how long a request that was producing
    #: may go without a row before it ends (``rows_lost``).
    upstream_grace_s: float = flagged(
        5.0,
        help="after a detokenizer (router) restart, a request that was producing ends "
        "with a 503 (rows_lost) if no output comes within this long",
        bound="positive",
    )
    #: How long a new request waits for admission while the stack is paused before it
    #: is refused (``paused_too_long``).
    pause_wait_s: float = flagged(
        600.0,
        help="a new request waits this long while paused, then is refused with a 503",
        bound="positive",
    )
    allow_remote: bool = False
    #: The stack key the worker registers with (:mod:`router_core.credentials`); None:
    #: none (accepted only by a router that has no key either).
    key: str | None = field(default=None, repr=False)
    #: CURVE keys for a worker on another host, connecting through the worker gateway.
    curve: ClientKeys | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_endpoint(self.address, allow_remote=self.allow_remote)
        # Through the gateway the two endpoints are another host's, authenticated by CURVE.
        remote = self.allow_remote or self.curve is not None
        for endpoint in (self.requests_endpoint, self.workers_endpoint):
            check_endpoint(endpoint, allow_remote=remote)
        if self.hwm <= 0:
            raise ValueError("hwm must be positive (bounded queues)")
        waits = (self.register_retry_s, self.register_wait_s, self.send_timeout_s)
        if min(*waits, self.idle_timeout_s, self.pause_wait_s, self.upstream_grace_s) <= 0:
            raise ValueError(
                "register_retry_s, register_wait_s, send_timeout_s, idle_timeout_s, "
                "pause_wait_s and upstream_grace_s must be > 0"
            )

    @classmethod
    def in_run_dir(cls, run_dir: str | Path, worker_id: str, **limits: float) -> WorkerLinkSettings:
        """The default layout: the worker's and the router's ``ipc://`` paths in ``run_dir``."""
        router = RouterEndpoints.in_run_dir(run_dir)
        return cls(
            address=worker_address(run_dir, worker_id),
            requests_endpoint=router.requests,
            workers_endpoint=router.workers,
            **limits,  # type: ignore[arg-type]
        )
