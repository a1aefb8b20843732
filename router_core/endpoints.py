"""Where each process binds and connects, and the loopback-only default.

Every endpoint defaults to an ``ipc://`` path in one run directory, so nothing is
reachable from another host unless an operator asks for a ``tcp://`` address on purpose.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final, Literal

import msgspec

__all__ = [
    "DETOK_ROUTER_STATE_FILE",
    "OUTPUTS_VIA_ALIASES",
    "OUTPUTS_VIA_CHOICES",
    "ROUTER_STATE_FILE",
    "DetokenizerRouterEndpoints",
    "EndpointError",
    "EngineEndpoints",
    "OutputsVia",
    "RouterEndpoints",
    "check_endpoint",
    "is_loopback_host",
    "parse_outputs_via",
    "worker_address",
]

_SCHEMES = ("ipc://", "tcp://", "inproc://")


class EndpointError(ValueError):
    """An endpoint string that Switchboard refuses to use."""


def check_endpoint(endpoint: str, *, allow_remote: bool = False) -> str:
    """Return ``endpoint`` if usable; refuse unknown schemes and non-loopback TCP.

    ``allow_remote`` lifts the loopback rule for deployments that cross hosts on purpose.
    """
    if not endpoint.startswith(_SCHEMES):
        raise EndpointError(f"{endpoint!r}: expected one of {', '.join(_SCHEMES)}")
    if endpoint.startswith("tcp://") and not allow_remote:
        host = endpoint.removeprefix("tcp://").rpartition(":")[0].strip("[]")
        if not is_loopback_host(host):
            raise EndpointError(f"{endpoint!r}: binds beyond loopback (pass allow_remote)")
    return endpoint


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, ``127.0.0.0/8``, ``::1``,
    with or without IPv6 brackets)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ipc(run_dir: str | Path, name: str) -> str:
    return f"ipc://{Path(run_dir) / name}"


def worker_address(run_dir: str | Path, worker_id: str) -> str:
    """The return address a worker binds in ``run_dir`` by default."""
    return _ipc(run_dir, f"worker-{worker_id}")


class RouterEndpoints(msgspec.Struct, frozen=True, kw_only=True):
    """The tokenizer router's sockets.

    The router binds ``requests`` (PULL: workers' generate, embed and abort requests),
    ``workers`` (PULL: workers' registration, heartbeats, deregistration and
    acknowledgements), ``engine_events`` (PULL: engine acknowledgements and load
    snapshots), ``outputs`` (PULL: outputs routed back to workers through the router) and
    ``control`` (ROUTER). It connects a PUSH to ``engine``, which the engine binds.

    Requests and worker control travel apart so that a busy engine can push back on
    requests (the router stops reading them) while heartbeats and acknowledgements still
    get through.
    """

    requests: str
    workers: str
    engine: str
    engine_events: str
    outputs: str
    control: str

    @classmethod
    def in_run_dir(cls, run_dir: str | Path) -> RouterEndpoints:
        """The default layout: one ``ipc://`` socket file per endpoint in ``run_dir``."""
        return cls(
            requests=_ipc(run_dir, "router-requests"),
            workers=_ipc(run_dir, "router-workers"),
            engine=_ipc(run_dir, "engine"),
            engine_events=_ipc(run_dir, "router-engine-events"),
            outputs=_ipc(run_dir, "router-outputs"),
            control=_ipc(run_dir, "router-control"),
        )


#: The tokenizer router's state file in the run directory (pause state, drain marks and
#: operation counter across its restarts).
ROUTER_STATE_FILE = "router-state.json"

#: The detokenizer router's state file in the run directory (which worker goes to which
#: detokenizer, across its restarts).
DETOK_ROUTER_STATE_FILE = "detok-router-state.json"


class DetokenizerRouterEndpoints(msgspec.Struct, frozen=True, kw_only=True):
    """The detokenizer router's sockets.

    It binds ``inbound`` (PULL: the engine's outputs) and ``control`` (ROUTER), and
    connects a PUSH to each of ``detokenizers``, which the detokenizers bind.
    """

    inbound: str
    detokenizers: list[str]
    control: str

    @classmethod
    def in_run_dir(cls, run_dir: str | Path, count: int) -> DetokenizerRouterEndpoints:
        """The default layout for ``count`` detokenizers in ``run_dir``."""
        return cls(
            inbound=_ipc(run_dir, "detok-router-in"),
            detokenizers=[_ipc(run_dir, f"detokenizer-{i}") for i in range(count)],
            control=_ipc(run_dir, "detok-router-control"),
        )


#: Whether a process's outputs go through the tokenizer router (``router``: its
#: ``outputs``, which splits them per worker) or not (``direct``: the engine's to the
#: detokenizer router's ``inbound``, a detokenizer's straight to each owning worker).
#: One vocabulary for ``switchboard engine``, ``detokenizer`` and ``up``.
OutputsVia = Literal["direct", "router"]
OUTPUTS_VIA_CHOICES: Final[tuple[OutputsVia, ...]] = ("direct", "router")
#: Old spellings, still accepted: the engine's ``detokenizers``, the detokenizer's and
#: ``up``'s ``workers``.
OUTPUTS_VIA_ALIASES: Final[Mapping[str, OutputsVia]] = MappingProxyType(
    {"detokenizers": "direct", "workers": "direct"}
)


def parse_outputs_via(value: str) -> OutputsVia:
    """``value`` as an :data:`OutputsVia`, an old spelling mapped; ValueError if unknown."""
    spellings: dict[str, OutputsVia] = {choice: choice for choice in OUTPUTS_VIA_CHOICES}
    found = spellings.get(value) or OUTPUTS_VIA_ALIASES.get(value)
    if found is None:
        raise ValueError(
            "outputs_via must be 'direct' or 'router' (old: 'detokenizers', 'workers'), "
            f"not {value!r}"
        )
    return found


class EngineEndpoints(msgspec.Struct, frozen=True, kw_only=True):
    """The engine's sockets.

    The engine binds ``inbound`` (PULL: what the tokenizer router's ``engine`` endpoint
    points at) and connects a PUSH to ``events`` (the router's ``engine_events``) and one
    to ``outputs`` (the detokenizer router's ``inbound``, or the router's ``outputs``).
    """

    inbound: str
    events: str
    outputs: str

    @classmethod
    def in_run_dir(
        cls, run_dir: str | Path, outputs_via: OutputsVia | Literal["detokenizers"] = "direct"
    ) -> EngineEndpoints:
        """The default layout, matching the routers' ``in_run_dir`` in ``run_dir``.

        ``outputs_via`` is ``direct`` (outputs to the detokenizer router) or ``router``
        (to the tokenizer router's ``outputs``); the old ``detokenizers`` means ``direct``.
        """
        router = RouterEndpoints.in_run_dir(run_dir)
        if parse_outputs_via(outputs_via) == "router":
            outputs = router.outputs
        else:
            outputs = DetokenizerRouterEndpoints.in_run_dir(run_dir, 0).inbound
        return cls(inbound=router.engine, events=router.engine_events, outputs=outputs)
