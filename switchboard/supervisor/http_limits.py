"""The stack's HTTP limit settings, and the flags that hand them to the HTTP children.

:class:`HttpLimitSettings` is the part of :class:`~switchboard.supervisor.settings.
StackSettings` that every HTTP server of the stack shares (the workers and the admin
app, :mod:`httpkit.limits`): one value each, except the connection and body limits, which
differ (``max_connections`` and ``max_body_bytes`` for each worker,
``admin_max_connections`` and ``admin_max_body_bytes`` for the admin app), and the admin
app's ``admin_max_subscribers``. Their defaults are the workers' (``keep_alive_s`` 10 s,
so under ``switchboard up`` the admin app keeps idle connections as long as the workers
do) and, for the ``admin_`` ones, the admin app's.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

from app.settings import AdminSettings
from httpkit.hosts import parse_allowed_hosts
from switchboard.worker.settings import WorkerSettings

__all__ = ["HttpLimitSettings", "http_limit_flags"]


class HttpLimitSettings(BaseSettings):
    """The HTTP limits of ``switchboard up``'s workers and admin app."""

    max_header_bytes: int = Field(
        WorkerSettings.max_header_bytes,
        ge=1,
        description="largest request head (request line and headers), in bytes, the workers "
        "and the admin app accept; a larger one is answered 431",
    )
    header_timeout_s: float = Field(
        WorkerSettings.header_timeout_s,
        gt=0,
        description="seconds a request head has to arrive whole from its first byte; then 408",
    )
    body_timeout_s: float = Field(
        WorkerSettings.body_timeout_s,
        gt=0,
        description="seconds a request body has to arrive whole after its head; then 408",
    )
    keep_alive_s: float = Field(
        WorkerSettings.keep_alive_s,
        gt=0,
        description="seconds an HTTP connection without a request in progress (a fresh one "
        "too) stays open",
    )
    max_connections: int = Field(
        WorkerSettings.max_connections,
        ge=1,
        description="connections each worker process holds at once; beyond, 503 and close",
    )
    admin_max_connections: int = Field(
        AdminSettings.model_fields["max_connections"].default,
        ge=1,
        description="connections the admin app holds at once; beyond, 503 and close",
    )
    max_body_bytes: int = Field(
        WorkerSettings.max_body_bytes,
        ge=1,
        description="largest request body, in bytes, a worker accepts; a larger one is "
        "answered 413",
    )
    admin_max_body_bytes: int = Field(
        AdminSettings.model_fields["max_body_bytes"].default,
        ge=0,
        description="largest request body, in bytes, the admin app accepts; a larger one is "
        "answered 413",
    )
    admin_max_subscribers: int = Field(
        AdminSettings.model_fields["max_subscribers"].default,
        ge=1,
        description="/api/events streams the admin app holds at once; beyond, 503",
    )
    allowed_hosts: str = Field(
        WorkerSettings.allowed_hosts,
        description="Host names the workers and the admin app accept besides localhost, "
        "loopback addresses and the address a request came in on (comma-separated; * "
        "accepts any); others get 421. Give the names clients use to reach the stack "
        "when it serves other machines",
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _host_list(cls, value: str) -> str:
        parse_allowed_hosts(value)  # a ValueError names the entry
        return value


def http_limit_flags(settings: HttpLimitSettings, *, admin: bool) -> tuple[str, ...]:
    """The flags handing ``settings`` to a worker, or (``admin``) to the admin app."""
    connections = settings.admin_max_connections if admin else settings.max_connections
    body = settings.admin_max_body_bytes if admin else settings.max_body_bytes
    streams = ("--max-subscribers", str(settings.admin_max_subscribers)) if admin else ()
    return (
        *("--max-body-bytes", str(body)),
        *streams,
        *("--max-header-bytes", str(settings.max_header_bytes)),
        *("--header-timeout-s", repr(settings.header_timeout_s)),
        *("--body-timeout-s", repr(settings.body_timeout_s)),
        *("--keep-alive-s", repr(settings.keep_alive_s)),
        *("--max-connections", str(connections)),
        # The = form: a value starting with a dash would otherwise read as a flag.
        f"--allowed-hosts={settings.allowed_hosts}",
    )
