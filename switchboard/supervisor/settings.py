"""The stack's settings: command-line flags over ``SWITCHBOARD_*`` variables over a TOML file.

Every setting has one name used three ways: the TOML key (``drain_timeout_s``), the
environment variable (``SWITCHBOARD_DRAIN_TIMEOUT_S``) and the flag
(``--drain-timeout-s``); a renamed setting's old name (:data:`RENAMED`) is still
accepted in all three. :func:`load_settings` merges them, flags winning over the
environment, the environment over the file, the file over the defaults, and reports
anything wrong (an unknown key or variable, a bad value, an unreadable file) as one
:class:`SettingsError` whose message is a single line naming where the value came from.
Every duration ends in ``_s``. What the supervisor hands to a child defaults to that
child's own settings definition (the worker's, the engine's, the admin app's), so no
default is written twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from app.settings import AdminSettings
from app.tokens import (
    API_KEY_TOKEN_NAME,
    TokenError,
    TokenTable,
    api_key_token,
    check_exposed_tokens,
    parse_tokens,
    short_tokens,
)
from router_core.endpoints import OutputsVia, check_endpoint, is_loopback_host, parse_outputs_via
from router_core.worker_link.settings import WorkerLinkSettings
from switchboard.supervisor.engine_settings import EngineSettings
from switchboard.supervisor.gateway_settings import GatewayStackSettings
from switchboard.supervisor.http_limits import HttpLimitSettings
from switchboard.supervisor.request_caps import RequestCapSettings
from switchboard.supervisor.sources import (
    ENV_PREFIX,
    FOREIGN_ENV,
    SECRET_FIELDS,
    Origins,
    SettingNames,
    SettingsError,
    describe_invalid,
    env_name,
    flag_name,
    read_environment,
    read_toml,
)
from switchboard.supervisor.stop_budget import least_grace_s
from switchboard.worker.settings import WorkerSettings

__all__ = [
    "ENV_PREFIX",
    "FOREIGN_ENV",
    "RENAMED",
    "SECRET_FIELDS",
    "SettingsError",
    "StackSettings",
    "env_name",
    "flag_name",
    "is_loopback_host",
    "load_settings",
]


def _link_default(name: str) -> Any:
    """A worker link setting's default (the link's settings need endpoints to be built)."""
    return WorkerLinkSettings.__dataclass_fields__[name].default


#: Old names of renamed settings (TOML key, variable and flag alike) -> the setting.
RENAMED: Final = {
    "step_time": "step_time_s",
    "per_token_cost": "per_token_cost_s",
    "graceful_timeout": "graceful_timeout_s",
}

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: The values below the environment's own variables: those given under old variable
#: names, then the TOML file's. pydantic-settings builds its sources in a classmethod
#: without per-call arguments, so they travel in a context variable that
#: :func:`load_settings` sets around construction.
_LOWER_SOURCES: ContextVar[tuple[dict[str, Any], dict[str, Any]]] = ContextVar(
    "switchboard_lower_sources", default=({}, {})
)


class StackSettings(EngineSettings, HttpLimitSettings, RequestCapSettings, GatewayStackSettings):
    """Everything ``switchboard up`` needs to start, watch and stop one stack.

    A setting passed through to a child has that child's flag name (``step_time_s`` is
    the engine's ``--step-time-s``) and that child's default. The HTTP limits are
    :class:`~switchboard.supervisor.http_limits.HttpLimitSettings`', the caps on one
    request :class:`~switchboard.supervisor.request_caps.RequestCapSettings`', the engine's
    :class:`~switchboard.supervisor.engine_settings.EngineSettings`'.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        env_ignore_empty=True,
        validate_default=True,
    )

    workers: int = Field(2, ge=1, description="HTTP worker processes (N), sharing one port")
    detokenizers: int = Field(2, ge=1, description="detokenizer processes (M)")
    host: str = Field(
        WorkerSettings.host,
        min_length=1,
        description="address the workers and the admin app listen on (the routers, engine "
        "and detokenizers use ipc:// sockets in the run dir, never an address)",
    )
    port: int = Field(WorkerSettings.port, ge=1, le=65535, description="port the workers share")
    allow_remote: bool = Field(
        False, description="permit a host beyond loopback (serving to other machines)"
    )
    admin_port: int = Field(
        AdminSettings.model_fields["port"].default,
        ge=1,
        le=65535,
        description="port of the admin app (HTTP API and operator console), on host",
    )
    admin_operator_tokens: SecretStr | None = Field(
        None,
        description="admin tokens for every endpoint, name:token,... (unset, with no viewer "
        "tokens either: one operator token is generated and the console URL printed)",
    )
    admin_viewer_tokens: SecretStr | None = Field(
        None, description="admin tokens for reads only, name:token,..."
    )
    api_key: SecretStr | None = Field(
        None,
        description="a key SGLang tooling sends as Authorization: Bearer to the workers' "
        "/pause_generation, /continue_generation and /abort_request (SGLang's --api-key): "
        "one more operator token of the admin app, named api-key in its audit (the "
        "generation endpoints stay open)",
    )
    admin_audit_log: Path | None = Field(
        None,
        description="the admin app also writes every audit record to this file, one JSON "
        "object per line (appended; created with mode 0600); unset: the log only",
    )
    model_name: str = Field(
        WorkerSettings.model_name, min_length=1, description="model name the workers report"
    )
    run_dir: Path | None = Field(
        None,
        description="directory for the ipc:// socket files (unset: a fresh temporary "
        "directory, removed at exit)",
    )
    outputs_via: OutputsVia = Field(
        "direct",
        description="direct: detokenizers send text straight to the workers; router: through "
        "the tokenizer router (the old value workers means direct)",
    )
    log_level: str = Field("INFO", description="log level of the supervisor and every child")
    graceful_timeout_s: float = Field(
        WorkerSettings.graceful_timeout_s,
        gt=0,
        description="seconds a stopping worker lets in-flight requests finish",
    )
    drain_timeout_s: float = Field(
        30.0, ge=0, description="seconds a stop waits for the workers to drain"
    )
    stop_grace_s: float = Field(
        28.0,
        gt=0,
        description="seconds a whole stop may take, from the first signal to exit, drain "
        "included (each step is shortened to fit); keep it below the grace period of "
        "whatever stops the stack (Kubernetes: 30 s)",
    )
    idle_timeout_s: float = Field(
        _link_default("idle_timeout_s"),
        gt=0,
        description="seconds a request may go without output while not paused before its "
        "worker ends it with a 503 (the bound on a request whose last output was lost)",
    )
    upstream_grace_s: float = Field(
        _link_default("upstream_grace_s"),
        gt=0,
        description="seconds a request that was producing may go without output after a "
        "detokenizer (router) restart before its worker ends it with a 503 (rows_lost)",
    )
    pause_wait_s: float = Field(
        _link_default("pause_wait_s"),
        gt=0,
        description="seconds a new request waits while paused before a 503",
    )
    startup_timeout_s: float = Field(
        60.0, gt=0, description="seconds the whole stack has to become ready"
    )
    stop_timeout_s: float = Field(
        10.0, gt=0, description="seconds a child has after SIGTERM before SIGKILL"
    )
    restart_backoff_initial_s: float = Field(
        0.5, gt=0, description="delay before the first restart of a crashed child"
    )
    restart_backoff_max_s: float = Field(
        10.0, gt=0, description="longest delay between restarts (the delay doubles)"
    )
    restart_reset_after_s: float = Field(
        30.0, gt=0, description="a child up this long restarts after the initial delay again"
    )
    metrics: bool = Field(
        True,
        description="workers, engine and detokenizers record Prometheus metrics in "
        "<run dir>/metrics (the admin app's /metrics serves them with the routers'); "
        "off: they record nothing",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="OTLP/HTTP endpoint every process exports traces to, e.g. "
        "http://127.0.0.1:4318 (sets OTEL_EXPORTER_OTLP_ENDPOINT for each child; unset: "
        "the OTEL_* environment decides, and without an endpoint there is no tracing)",
    )

    @field_validator("outputs_via", mode="before")
    @classmethod
    def _outputs_via(cls, value: object) -> object:
        # An old spelling is the same choice; anything else is left to the Literal check.
        return parse_outputs_via(value) if isinstance(value, str) else value

    @field_validator("run_dir", "admin_audit_log")
    @classmethod
    def _expand_home(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    @field_validator("admin_operator_tokens", "admin_viewer_tokens")
    @classmethod
    def _token_list(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            parse_tokens(value.get_secret_value(), what=str(info.field_name))
        return value

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            api_key_token(value.get_secret_value())
        return value

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        scheme, _, rest = value.partition("://")
        if scheme not in ("http", "https") or not rest:
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(_LOG_LEVELS)}")
        return level

    @model_validator(mode="after")
    def _coherent(self) -> StackSettings:
        if not self.allow_remote and not is_loopback_host(self.host):
            raise ValueError(
                f"host {self.host} is beyond loopback; pass --allow-remote "
                "(SWITCHBOARD_ALLOW_REMOTE=1) to serve other machines"
            )
        for endpoint in (self.gateway_listen, self.control):
            if endpoint is not None:
                check_endpoint(endpoint, allow_remote=self.allow_remote)
        if self.admin_port == self.port:
            raise ValueError(f"admin_port and port are both {self.port}")
        if self.restart_backoff_max_s < self.restart_backoff_initial_s:
            raise ValueError("restart_backoff_max_s is below restart_backoff_initial_s")
        if self.stop_grace_s < least_grace_s(self.graceful_timeout_s):
            raise ValueError(
                f"stop_grace_s ({self.stop_grace_s:g}) must be at least "
                f"{least_grace_s(self.graceful_timeout_s):g}: graceful_timeout_s "
                f"({self.graceful_timeout_s:g}) and the time to stop the rest"
            )
        tokens = self.admin_tokens()  # raises for a name or token given both roles
        if self.role == "workers":
            return self  # no admin app on a worker host: its tokens are the control host's
        if tokens.empty and not is_loopback_host(self.host):
            # A generated token would travel in a URL to a page served to other machines
            # over plain HTTP: beyond loopback, operators choose and configure tokens.
            raise ValueError(
                f"host {self.host} is beyond loopback, so the admin app needs configured "
                "tokens: set admin_operator_tokens (SWITCHBOARD_ADMIN_OPERATOR_TOKENS)"
            )
        if self.allow_remote or not is_loopback_host(self.host):
            # The first short operator token is the one named: say where it was set.
            key_first = short_tokens(tokens.operators)[:1] == (API_KEY_TOKEN_NAME,)
            check_exposed_tokens(
                tokens,
                operators_setting="api_key" if key_first else "admin_operator_tokens",
                viewers_setting="admin_viewer_tokens",
                why=f"listens on {self.host}"
                if not is_loopback_host(self.host)
                else "has allow_remote",
            )
        return self

    def admin_tokens(self) -> TokenTable:
        """The configured admin tokens (possibly none), ``api_key`` among the operators'
        as ``api-key``; TokenError if they clash."""
        operators = parse_tokens(_reveal(self.admin_operator_tokens), what="admin_operator_tokens")
        key = _reveal(self.api_key)
        if key is not None:
            named = api_key_token(key)
            if any(item.name == named.name for item in operators):
                raise TokenError(
                    f"api_key: admin_operator_tokens already has a token named {named.name!r}, "
                    "the name the API key takes; rename that one"
                )
            operators = (*operators, named)
        return TokenTable(
            operators, parse_tokens(_reveal(self.admin_viewer_tokens), what="admin_viewer_tokens")
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init arguments) over the environment (its old variable names below its
        current ones) over the TOML file; no dotenv."""
        renamed_env, toml = _LOWER_SOURCES.get()
        return (
            init_settings,
            env_settings,
            InitSettingsSource(settings_cls, init_kwargs=renamed_env),
            InitSettingsSource(settings_cls, init_kwargs=toml),
        )

    #: Where each value came from (set by :func:`load_settings`), for :meth:`origin`.
    _origins: Origins | None = PrivateAttr(default=None)

    def origin(self, setting: str) -> str:
        """``setting`` as the operator gave it, for a message about its value: the flag,
        the variable or the file and key (:meth:`Origins.of`)."""
        value = getattr(self, setting)
        return f"{setting} {value}" if self._origins is None else self._origins.of(setting, value)

    def log_level_number(self) -> int:
        """``log_level`` as a :mod:`logging` level."""
        return logging.getLevelNamesMapping()[self.log_level]


#: The settings a TOML file gives as a table.
_TABLES: Final = frozenset({"engine_env"})


def _reveal(secret: SecretStr | None) -> str | None:
    return None if secret is None else secret.get_secret_value()


def load_settings(
    cli: Mapping[str, Any], *, config_file: str | Path | None = None
) -> StackSettings:
    """The settings from ``cli`` (flags given, by field name), the environment and the file.

    ``config_file`` is a TOML file of top-level ``key = value`` pairs named like the
    fields (or their old names). The settings remember where each value came from
    (:meth:`StackSettings.origin`). Raises :class:`SettingsError` (one line) for a missing
    or malformed file, an unknown key or ``SWITCHBOARD_*`` variable, a setting given
    under its old and its new name in one place, or a value that fails validation.
    """
    names = SettingNames(tuple(StackSettings.model_fields), RENAMED, tables=_TABLES)
    toml = None
    if config_file is not None:
        toml = read_toml(Path(config_file).expanduser(), names)
    environment = read_environment(os.environ, names)
    token = _LOWER_SOURCES.set((environment.renamed_values, toml.values if toml else {}))
    origins = Origins(set(cli), environment, toml)
    try:
        settings = StackSettings(**dict(cli))
    except ValidationError as exc:
        raise SettingsError(describe_invalid(exc, origins)) from exc
    finally:
        _LOWER_SOURCES.reset(token)
    settings._origins = origins
    return settings
