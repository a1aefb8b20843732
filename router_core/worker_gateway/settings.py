"""How a worker gateway runs: where it listens, whom it trusts, where it forwards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from router_core.endpoints import RouterEndpoints, check_endpoint
from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM
from router_core.settings_fields import flagged

__all__ = ["GatewaySettings", "requests_listen_for"]


def requests_listen_for(control_listen: str) -> str:
    """The requests endpoint beside a control endpoint: the same host, the next port
    (``tcp://10.0.0.5:7100`` → ``tcp://10.0.0.5:7101``). ``ValueError`` if the control
    endpoint is not ``tcp://HOST:PORT`` with a numeric port below 65535."""
    host, _, port = control_listen.removeprefix("tcp://").rpartition(":")
    if not control_listen.startswith("tcp://") or not host or not port.isdigit():
        raise ValueError(f"{control_listen!r}: expected tcp://HOST:PORT")
    if not 0 < int(port) < 65535:
        raise ValueError(f"{control_listen!r}: the port must be 1..65534 (the next is requests)")
    return f"tcp://{host}:{int(port) + 1}"


@dataclass(frozen=True, kw_only=True)
class GatewaySettings:
    """A gateway listens at ``control_listen`` (ROUTER) and the next port (PULL), both
    CURVE servers with the key pair in ``key_pair_file``, accepting the keys listed in
    ``authorised_keys_file``; it keeps each remote worker's return address at
    ``return_prefix`` + worker id and forwards to the router's ``requests`` and
    ``workers`` endpoints."""

    control_listen: str
    return_prefix: str
    router: RouterEndpoints
    key_pair_file: Path
    authorised_keys_file: Path
    max_peers: int = flagged(
        4096,
        help="remote workers the gateway speaks for at most; a HELLO beyond is refused (full)",
        bound="positive",
    )
    idle_s: float = flagged(
        30.0,
        help="a remote worker silent this long is forgotten and its return address closed "
        "(it says HELLO again if it lives); must exceed the router's heartbeat timeout",
        bound="positive",
    )
    hwm: int = DEFAULT_HWM
    backlog_limit: int = DEFAULT_BACKLOG
    drain_timeout_s: float = 1.0
    allow_remote: bool = False

    @property
    def requests_listen(self) -> str:
        """Where the gateway's PULL for remote workers' requests listens."""
        return requests_listen_for(self.control_listen)

    def __post_init__(self) -> None:
        check_endpoint(self.control_listen, allow_remote=self.allow_remote)
        requests_listen_for(self.control_listen)
        if not self.return_prefix.startswith("ipc://"):
            raise ValueError("return_prefix must be an ipc:// path prefix on this host")
        if self.max_peers <= 0 or self.idle_s <= 0 or self.hwm <= 0 or self.backlog_limit <= 0:
            raise ValueError("max_peers, idle_s, hwm and backlog_limit must be positive")
