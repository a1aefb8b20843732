"""Where each process binds and connects, and the loopback-only default.

Every endpoint defaults to an ``ipc://`` path in one run directory, so nothing is
reachable from another host unless an operator asks for a ``tcp://`` address on purpose.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

import msgspec

__all__ = [
    "DetokenizerRouterEndpoints",
    "EndpointError",
    "EngineEndpoints",
    "OutputsVia",
    "RouterEndpoints",
    "check_endpoint",
    "is_loopback_host",
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


#: Where an engine sends its outputs: the detokenizer router's ``inbound`` (the default
#: design) or the tokenizer router's ``outputs`` (split straight to the owning workers).
OutputsVia = Literal["detokenizers", "router"]


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
        cls, run_dir: str | Path, outputs_via: OutputsVia = "detokenizers"
    ) -> EngineEndpoints:
        """The default layout, matching the routers' ``in_run_dir`` in ``run_dir``."""
        router = RouterEndpoints.in_run_dir(run_dir)
        if outputs_via == "detokenizers":
            outputs = DetokenizerRouterEndpoints.in_run_dir(run_dir, 0).inbound
        elif outputs_via == "router":
            outputs = router.outputs
        else:
            raise ValueError(f"outputs_via must be 'detokenizers' or 'router', not {outputs_via!r}")
        return cls(inbound=router.engine, events=router.engine_events, outputs=outputs)
