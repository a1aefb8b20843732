"""The stack's worker gateway: where workers on other hosts connect, and with which keys.

:class:`GatewayStackSettings` is the part of
:class:`~switchboard.supervisor.settings.StackSettings` that, with ``gateway_listen``
set, adds the worker gateway (``switchboard gateway``) to the stack, so HTTP workers on
other hosts can join it (docs/deploy.md). Unset, the stack is one host, as before.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from router_core.worker_gateway import requests_listen_for

__all__ = ["GatewayStackSettings", "gateway_flags"]


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

    @field_validator("gateway_listen")
    @classmethod
    def _tcp_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            requests_listen_for(value)  # ValueError names the expected form
        return value

    @field_validator("curve_key_pair", "authorised_keys")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    @model_validator(mode="after")
    def _complete(self) -> GatewayStackSettings:
        if self.gateway_listen is not None and (
            self.curve_key_pair is None or self.authorised_keys is None
        ):
            raise ValueError("gateway_listen needs curve_key_pair and authorised_keys")
        return self


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
