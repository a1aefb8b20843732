"""A stack across hosts: the worker gateway, the roles, and the keys they use.

:class:`GatewayStackSettings` is the part of
:class:`~switchboard.supervisor.settings.StackSettings` for more than one host
(docs/deploy.md). With ``gateway_listen`` set the stack adds the worker gateway
(``switchboard gateway``), so HTTP workers on other hosts can join it. ``role`` says what
one host runs: ``all`` (the default: one host, everything), ``control`` (everything but
the HTTP workers) or ``workers`` (only HTTP workers, connecting to the control host's
gateway and nowhere else). Every host of one stack shares one stack key file.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from router_core.worker_gateway import requests_listen_for

__all__ = ["GatewayStackSettings", "Role", "gateway_flags", "worker_id_prefix"]

Role = Literal["all", "control", "workers"]


class GatewayStackSettings(BaseSettings):
    """The worker gateway of ``switchboard up`` (off unless ``gateway_listen`` is set)."""

    gateway_listen: str | None = Field(
        None,
        description="tcp://HOST:PORT where the worker gateway listens for workers on other "
        "hosts (their requests on PORT+1; CURVE only); beyond loopback needs allow_remote; "
        "unset: no gateway",
    )
    curve_key_pair: Path | None = Field(
        None,
        description="this host's CURVE key pair, the .secret file of switchboard keys "
        "generate (needed with gateway_listen)",
    )
    authorised_keys: Path | None = Field(
        None,
        description="the public keys of the hosts whose workers the gateway lets in, one "
        "per line, reread when the file changes (needed with gateway_listen)",
    )
    gateway_max_peers: int = Field(
        4096, ge=1, description="remote workers the gateway speaks for at most"
    )
    role: Role = Field(
        "all",
        description="what this host runs: all (one host), control (router, gateway, "
        "engine, detokenizers, admin app; needs gateway_listen) or workers (HTTP workers "
        "only, connecting to control)",
    )
    control: str | None = Field(
        None,
        description="role workers: tcp://HOST:PORT (or HOST:PORT) of the control host's "
        "worker gateway, its gateway_listen; beyond loopback needs allow_remote",
    )
    gateway_public_key: Path | None = Field(
        None, description="role workers: the control host's .public key file"
    )
    stack_key_file: Path | None = Field(
        None,
        description="the stack key every host of a multi-host stack shares (switchboard "
        "keys stack FILE writes one; needed by roles control and workers); unset: a fresh "
        "key in the run dir each start",
    )
    worker_id_prefix: str | None = Field(
        None,
        description="worker ids are this prefix and 0, 1, ...; unique across the hosts of "
        "a stack (unset: w, or for role workers the host name and -w)",
    )
    control_admin_url: str | None = Field(
        None,
        description="role workers: the control host's admin app URL, where the workers "
        "forward /pause_generation, /continue_generation and /abort_request (unset: those "
        "answer 503 on a worker host)",
    )

    @field_validator("gateway_listen")
    @classmethod
    def _tcp_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            requests_listen_for(value)  # ValueError names the expected form
        return value

    @field_validator("control")
    @classmethod
    def _control_endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        endpoint = value if value.startswith("tcp://") else f"tcp://{value}"
        requests_listen_for(endpoint)  # ValueError names the expected form
        return endpoint

    @field_validator("worker_id_prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and not _PREFIX.fullmatch(value):
            raise ValueError(
                "expected 1 to 48 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
            )
        return value

    @field_validator("curve_key_pair", "authorised_keys", "gateway_public_key", "stack_key_file")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    @model_validator(mode="after")
    def _complete(self) -> GatewayStackSettings:
        if self.gateway_listen is not None and (
            self.curve_key_pair is None or self.authorised_keys is None
        ):
            raise ValueError("gateway_listen needs curve_key_pair and authorised_keys")
        if self.role == "control":
            _need(self, "role control", "gateway_listen", "stack_key_file")
        if self.role == "workers":
            _need(self, "role workers", "control", "curve_key_pair", "gateway_public_key")
            _need(self, "role workers", "stack_key_file")
            if self.gateway_listen is not None:
                raise ValueError("role workers runs no gateway: unset gateway_listen")
        return self


#: A worker id prefix: room left for the index within a worker id's 64 characters.
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}", re.ASCII)


def _need(settings: GatewayStackSettings, what: str, *names: str) -> None:
    missing = [name for name in names if getattr(settings, name) is None]
    if missing:
        raise ValueError(f"{what} needs {' and '.join(missing)}")


def worker_id_prefix(settings: GatewayStackSettings, hostname: str | None = None) -> str:
    """The prefix of this host's worker ids: ``worker_id_prefix``, else ``w``, or for
    role workers ``<host name>-w`` (the host name cut to its first label and to the
    characters a worker id may hold, so the ids of two worker hosts differ)."""
    if settings.worker_id_prefix is not None:
        return settings.worker_id_prefix
    if settings.role != "workers":
        return "w"
    name = (hostname if hostname is not None else socket.gethostname()).split(".")[0]
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "-", name).strip("-_")[:40]
    return f"{cleaned}-w" if cleaned else "w"


def gateway_flags(settings: GatewayStackSettings, *, allow_remote: bool) -> tuple[str, ...]:
    """The ``switchboard gateway`` flags for ``settings`` (gateway_listen set)."""
    assert settings.gateway_listen is not None
    return (
        *("--listen", settings.gateway_listen),
        *("--curve-key-pair", str(settings.curve_key_pair)),
        *("--authorised-keys", str(settings.authorised_keys)),
        *("--max-peers", str(settings.gateway_max_peers)),
        *(("--allow-remote",) if allow_remote else ()),
    )
