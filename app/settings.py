"""How the admin app runs: where the router is, where to listen, and whose tokens to accept.

``switchboard admin`` passes every flag it has; the environment supplies what has no
flag, the token lists above all (``SWITCHBOARD_ADMIN_OPERATOR_TOKENS``,
``SWITCHBOARD_ADMIN_VIEWER_TOKENS``), so tokens never appear on a command line.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.events import DEFAULT_MAX_SUBSCRIBERS
from app.tokens import TokenTable, check_exposed_tokens, parse_tokens
from httpkit.hosts import parse_allowed_hosts
from httpkit.limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_KEEP_ALIVE_S,
    DEFAULT_MAX_HEADER_BYTES,
    HttpLimits,
)
from router_core.endpoints import EndpointError, check_endpoint, is_loopback_host

__all__ = ["ENV_PREFIX", "STATIC_DIR", "AdminSettings", "is_loopback_host"]

#: Prefix of the admin app's environment variables.
ENV_PREFIX = "SWITCHBOARD_ADMIN_"
#: The operator console's files (``index.html`` and its assets).
STATIC_DIR = Path(__file__).resolve().parent / "static"


class AdminSettings(BaseSettings):
    """One admin app: its router, its address, its tokens and its event poller."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", env_ignore_empty=True, validate_default=True
    )

    control_endpoint: str = Field(
        min_length=1, description="the tokenizer router's control endpoint"
    )
    detok_control_endpoint: str | None = Field(
        default=None,
        min_length=1,
        description="the detokenizer router's control endpoint, read by /metrics (unset: "
        "no detokenizer router metrics)",
    )
    control_key: SecretStr | None = Field(
        default=None,
        description="the stack key sent with every control request (switchboard admin "
        "reads it from --key-file or stack.key in --run-dir); unset: none, which a router "
        "with a key refuses",
    )
    control_curve_key_pair: Path | None = Field(
        default=None,
        description="this app's .secret file, for a tcp:// control endpoint (which the "
        "routers hold to CURVE; its public key in their --control-authorised-keys)",
    )
    control_server_public_key: Path | None = Field(
        default=None,
        description="the routers' .public file, for a tcp:// control endpoint",
    )
    metrics_dir: Path | None = Field(
        default=None,
        description="the children's prometheus_client multiprocess "
        "directory, aggregated by /metrics (unset: none)",
    )
    metrics_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="seconds /metrics waits for each router"
    )
    host: str = Field(default="127.0.0.1", min_length=1, description="address to listen on")
    port: int = Field(default=8001, ge=1, le=65535, description="port to listen on")
    allow_remote: bool = Field(default=False, description="permit a host beyond loopback")
    operator_tokens: SecretStr | None = Field(
        default=None, description="name:token,... accepted for every endpoint"
    )
    viewer_tokens: SecretStr | None = Field(
        default=None, description="name:token,... accepted for reads"
    )
    poll_interval_s: float = Field(
        default=0.25, gt=0, le=60, description="seconds between the event poller's router reads"
    )
    control_timeout_s: float = Field(
        default=5.0, gt=0, le=600, description="seconds to wait for the router's answer to a read"
    )
    subscriber_queue: int = Field(
        default=512,
        ge=1,
        description="events queued per /api/events subscriber, plus two per worker the "
        "router lists when it subscribes, before it is dropped",
    )
    max_subscribers: int = Field(
        default=DEFAULT_MAX_SUBSCRIBERS,
        ge=1,
        description="/api/events streams open at once at most; beyond, 503 too_many_streams",
    )
    keepalive_s: float = Field(
        default=15.0, gt=0, description="seconds between SSE keep-alive comments"
    )
    max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=0,
        description="largest request body accepted, in bytes; a larger one (declared or "
        "chunked) is answered 413, no more of it read than the limit (the API's bodies are "
        "a few bytes; 1 MiB still lets a large malformed one, such as deeply nested JSON, "
        "be answered 400 for what is wrong with it)",
    )
    max_header_bytes: int = Field(
        default=DEFAULT_MAX_HEADER_BYTES,
        ge=1,
        description="largest request head (request line and headers) in bytes; a larger "
        "one is answered 431 and no more of it read",
    )
    header_timeout_s: float = Field(
        default=DEFAULT_HEADER_TIMEOUT_S,
        gt=0,
        description="seconds a request head has to arrive whole from its first byte; then 408",
    )
    body_timeout_s: float = Field(
        default=DEFAULT_BODY_TIMEOUT_S,
        gt=0,
        description="seconds a request body has to arrive whole after its head; then 408",
    )
    keep_alive_s: float = Field(
        default=DEFAULT_KEEP_ALIVE_S,
        gt=0,
        description="seconds a connection without a request in progress (a fresh one too) "
        "stays open",
    )
    max_connections: int = Field(
        default=512,
        ge=1,
        description="connections held at once; beyond, 503 and close (room for "
        "max_subscribers event streams and the console's requests)",
    )
    allowed_hosts: str = Field(
        default="",
        description="Host names accepted besides localhost, loopback addresses and the "
        "address a request came in on (comma-separated; * accepts any); others get 421",
    )
    audit_log: Path | None = Field(
        default=None,
        description="a file that gets every audit record as one JSON object per line, besides "
        "the log (appended to; created with mode 0600); unset: the log only",
    )
    static_dir: Path = Field(default=STATIC_DIR, description="the operator console's files")
    version: str = Field(
        default="", description="the admin app's version, as /api/status reports it"
    )

    _tokens: TokenTable = PrivateAttr(default_factory=TokenTable)

    def _check_control_curve(self) -> None:
        """A ``tcp://`` control endpoint needs both CURVE files (the routers refuse a
        client without keys); ``ValueError`` naming what is missing."""
        pair, server = self.control_curve_key_pair, self.control_server_public_key
        endpoints = (self.control_endpoint, self.detok_control_endpoint)
        tcp = [each for each in endpoints if each and each.startswith("tcp://")]
        if (pair is None) != (server is None):
            raise ValueError("set both control_curve_key_pair and control_server_public_key")
        if tcp and pair is None:
            raise ValueError(
                f"the control endpoint {tcp[0]} is tcp://, where the routers require "
                f"CURVE: set {ENV_PREFIX}CONTROL_CURVE_KEY_PAIR and "
                f"{ENV_PREFIX}CONTROL_SERVER_PUBLIC_KEY"
            )

    @field_validator("allowed_hosts")
    @classmethod
    def _host_list(cls, value: str) -> str:
        parse_allowed_hosts(value)  # a ValueError names the entry
        return value

    @field_validator("control_endpoint", "detok_control_endpoint")
    @classmethod
    def _usable_endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            # The router's own socket rules; remote control endpoints need allow_remote,
            # checked again in _coherent once allow_remote is known.
            return check_endpoint(value, allow_remote=True)
        except EndpointError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _coherent(self) -> AdminSettings:
        if not self.allow_remote and not is_loopback_host(self.host):
            raise ValueError(f"host {self.host} is beyond loopback; pass --allow-remote")
        try:
            for endpoint in (self.control_endpoint, self.detok_control_endpoint):
                if endpoint is not None:
                    check_endpoint(endpoint, allow_remote=self.allow_remote)
        except EndpointError as exc:
            raise ValueError(str(exc)) from exc
        self._check_control_curve()
        operators = parse_tokens(_reveal(self.operator_tokens), what=f"{ENV_PREFIX}OPERATOR_TOKENS")
        viewers = parse_tokens(_reveal(self.viewer_tokens), what=f"{ENV_PREFIX}VIEWER_TOKENS")
        self._tokens = TokenTable(operators, viewers)
        if self._tokens.empty and not is_loopback_host(self.host):
            raise ValueError(
                f"host {self.host} is beyond loopback and no token is configured: set "
                f"{ENV_PREFIX}OPERATOR_TOKENS (and {ENV_PREFIX}VIEWER_TOKENS)"
            )
        if self.exposed:
            check_exposed_tokens(
                self._tokens,
                operators_setting=f"{ENV_PREFIX}OPERATOR_TOKENS",
                viewers_setting=f"{ENV_PREFIX}VIEWER_TOKENS",
                why=f"listens on {self.host}"
                if not is_loopback_host(self.host)
                else "has --allow-remote",
            )
        return self

    @property
    def exposed(self) -> bool:
        """Whether the app may be reachable beyond loopback: it listens beyond it, or
        ``allow_remote`` says it may; its tokens must then be long
        (:data:`~app.tokens.MIN_REMOTE_TOKEN_CHARS`)."""
        return self.allow_remote or not is_loopback_host(self.host)

    @property
    def http_limits(self) -> HttpLimits:
        """The HTTP limits these settings set (:mod:`httpkit.limits`)."""
        return HttpLimits.of(self)

    @property
    def tokens(self) -> TokenTable:
        """The accepted tokens, parsed."""
        return self._tokens

    @property
    def metrics_need_token(self) -> bool:
        """Whether ``/metrics`` asks for a token (a viewer's or an operator's): when viewer
        tokens are configured, or the app listens beyond loopback. Otherwise (a loopback
        app with only operator tokens, e.g. the generated one) it is open, so a local
        Prometheus scrapes it without credentials."""
        return bool(self._tokens.viewers) or not is_loopback_host(self.host)

    def with_tokens(self, tokens: TokenTable) -> AdminSettings:
        """These settings accepting ``tokens`` instead (a generated operator token)."""
        copy = self.model_copy()
        copy._tokens = tokens
        return copy


def _reveal(secret: SecretStr | None) -> str | None:
    return None if secret is None else secret.get_secret_value()
