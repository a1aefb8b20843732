"""The stack's settings: command-line flags over ``SWITCHBOARD_*`` variables over a TOML file.

Every setting has one name used three ways: the TOML key (``drain_timeout_s``), the
environment variable (``SWITCHBOARD_DRAIN_TIMEOUT_S``) and the flag
(``--drain-timeout-s``). :func:`load_settings` merges them, flags winning over the
environment, the environment over the file, the file over the defaults, and reports
anything wrong (an unknown key or variable, a bad value, an unreadable file) as one
:class:`SettingsError` whose message is a single line naming where the value came from.
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from app.tokens import TokenTable, parse_tokens
from router_core.endpoints import is_loopback_host

__all__ = [
    "ENV_PREFIX",
    "FOREIGN_ENV",
    "SECRET_FIELDS",
    "SettingsError",
    "StackSettings",
    "env_name",
    "flag_name",
    "is_loopback_host",
    "load_settings",
]

#: Prefix of every setting's environment variable.
ENV_PREFIX = "SWITCHBOARD_"

#: ``SWITCHBOARD_*`` variables that belong to other parts of Switchboard, not to the
#: stack's settings: they are passed through to the children and never an error.
FOREIGN_ENV = frozenset(
    {
        "SWITCHBOARD_CACHE_DIR",
        "SWITCHBOARD_NO_FASTPATH",
        # The operator commands' (switchboard status, pause, ...) admin URL and token.
        "SWITCHBOARD_ADMIN_URL",
        "SWITCHBOARD_ADMIN_TOKEN",
    }
)

#: Settings holding secrets: an error names where they came from, never their value.
SECRET_FIELDS = frozenset({"admin_operator_tokens", "admin_viewer_tokens"})

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: The TOML file of the settings being loaded. pydantic-settings builds its sources in a
#: classmethod without per-call arguments, so the path travels in a context variable
#: that :func:`load_settings` sets around construction.
_TOML_FILE: ContextVar[Path | None] = ContextVar("switchboard_toml_file", default=None)


class SettingsError(Exception):
    """A setting Switchboard refuses; the message is one line for the operator."""


class StackSettings(BaseSettings):
    """Everything ``switchboard up`` needs to start, watch and stop one stack.

    Settings passed through to a child keep that child's flag name (``step_time`` is the
    engine's ``--step-time``); durations the supervisor itself applies end in ``_s``.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        env_ignore_empty=True,
        validate_default=True,
    )

    workers: int = Field(2, ge=1, description="HTTP worker processes (N), sharing one port")
    detokenizers: int = Field(2, ge=1, description="detokenizer processes (M)")
    host: str = Field("127.0.0.1", min_length=1, description="address the workers listen on")
    port: int = Field(8000, ge=1, le=65535, description="port the workers share")
    allow_remote: bool = Field(
        False, description="permit a host beyond loopback (serving to other machines)"
    )
    admin_port: int = Field(
        8001,
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
    tokenizer: Path | None = Field(
        None, description="tokenizer.json or model directory (unset: the built-in tokenizer)"
    )
    model_name: str = Field(
        "switchboard-sim", min_length=1, description="model name the workers report"
    )
    run_dir: Path | None = Field(
        None,
        description="directory for the ipc:// socket files (unset: a fresh temporary "
        "directory, removed at exit)",
    )
    step_time: float = Field(0.005, ge=0, description="engine: seconds per scheduler step")
    per_token_cost: float = Field(0.0, ge=0, description="engine: extra seconds per token")
    max_running_requests: int = Field(256, ge=1, description="engine: running requests at most")
    max_tokens_per_step: int = Field(8192, ge=1, description="engine: prefill + decode budget")
    outputs_via: Literal["workers", "router"] = Field(
        "workers",
        description="detokenizers send text straight to the workers, or through the router",
    )
    log_level: str = Field("INFO", description="log level of the supervisor and every child")
    graceful_timeout: float = Field(
        10.0, gt=0, description="seconds a stopping worker lets in-flight requests finish"
    )
    drain_timeout_s: float = Field(
        30.0, ge=0, description="seconds a stop waits for the workers to drain"
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

    @field_validator("tokenizer", "run_dir")
    @classmethod
    def _expand_home(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    @field_validator("admin_operator_tokens", "admin_viewer_tokens")
    @classmethod
    def _token_list(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            parse_tokens(value.get_secret_value(), what=str(info.field_name))
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
        if self.admin_port == self.port:
            raise ValueError(f"admin_port and port are both {self.port}")
        if self.restart_backoff_max_s < self.restart_backoff_initial_s:
            raise ValueError("restart_backoff_max_s is below restart_backoff_initial_s")
        tokens = self.admin_tokens()  # raises for a name or token given both roles
        if tokens.empty and not is_loopback_host(self.host):
            # A generated token would travel in a URL to a page served to other machines
            # over plain HTTP: beyond loopback, operators choose and configure tokens.
            raise ValueError(
                f"host {self.host} is beyond loopback, so the admin app needs configured "
                "tokens: set admin_operator_tokens (SWITCHBOARD_ADMIN_OPERATOR_TOKENS)"
            )
        return self

    def admin_tokens(self) -> TokenTable:
        """The configured admin tokens (possibly none); TokenError if they clash."""
        return TokenTable(
            parse_tokens(_reveal(self.admin_operator_tokens), what="admin_operator_tokens"),
            parse_tokens(_reveal(self.admin_viewer_tokens), what="admin_viewer_tokens"),
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
        """Flags (init arguments) over the environment over the TOML file; no dotenv."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_file = _TOML_FILE.get()
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    def log_level_number(self) -> int:
        """``log_level`` as a :mod:`logging` level."""
        return logging.getLevelNamesMapping()[self.log_level]


def _reveal(secret: SecretStr | None) -> str | None:
    return None if secret is None else secret.get_secret_value()


def env_name(field: str) -> str:
    """The environment variable of setting ``field``."""
    return f"{ENV_PREFIX}{field.upper()}"


def flag_name(field: str) -> str:
    """The command-line flag of setting ``field``."""
    return "--" + field.replace("_", "-")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as exc:
        raise SettingsError(f"config file {path}: not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"config file {path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: not valid TOML: {exc}") from exc
    fields = StackSettings.model_fields
    for key, value in data.items():
        if key not in fields:
            raise SettingsError(
                f"config file {path}: unknown key {key!r}{_did_you_mean(key, list(fields))}"
            )
        if isinstance(value, dict):
            raise SettingsError(f"config file {path}: {key} must be a value, not a table")
    return data


def _check_environment(environ: Mapping[str, str]) -> set[str]:
    """The settings the environment sets; SettingsError for an unknown SWITCHBOARD_ name."""
    known = {env_name(field) for field in StackSettings.model_fields}
    present = set()
    for name in environ:
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in FOREIGN_ENV:
            continue
        if upper not in known:
            hint = _did_you_mean(upper, sorted(known))
            raise SettingsError(f"unknown environment variable {name}{hint}")
        if environ[name] != "":
            present.add(upper.removeprefix(ENV_PREFIX).lower())
    return present


class _Origins:
    """Where each given value came from, to name it in an error."""

    def __init__(
        self, cli: Mapping[str, Any], env: set[str], toml: Path | None, toml_keys: set[str]
    ) -> None:
        self.cli = cli
        self.env = env
        self.toml = toml
        self.toml_keys = toml_keys

    def of(self, field: str, value: object) -> str:
        """``field`` given ``value`` as the operator wrote it: flag, variable or TOML key."""
        if field in SECRET_FIELDS:
            value = "(hidden)"
        if field in self.cli:
            return f"{flag_name(field)} {value}"
        if field in self.env:
            return f"{env_name(field)}={value}"
        if field in self.toml_keys:
            return f"{self.toml}: {field} = {value!r}"
        return f"{field} {value}"


def _describe(error: ValidationError, origins: _Origins) -> str:
    parts = []
    for detail in error.errors(include_url=False):
        location = detail["loc"]
        message = detail["msg"].removeprefix("Value error, ")
        if not location:
            parts.append(message)
            continue
        field = str(location[0])
        if detail["type"] == "extra_forbidden":
            parts.append(f"unknown setting {field}")
            continue
        parts.append(f"{origins.of(field, detail.get('input'))}: {message}")
    # One line whatever a validator wrote.
    return "; ".join(parts).replace("\n", " ")


def load_settings(
    cli: Mapping[str, Any], *, config_file: str | Path | None = None
) -> StackSettings:
    """The settings from ``cli`` (flags given, by field name), the environment and the file.

    ``config_file`` is a TOML file of top-level ``key = value`` pairs named like the
    fields. Raises :class:`SettingsError` (one line) for a missing or malformed file, an
    unknown key or ``SWITCHBOARD_*`` variable, or a value that fails validation.
    """
    toml_path = Path(config_file).expanduser() if config_file is not None else None
    toml_keys = set(_read_toml(toml_path)) if toml_path is not None else set()
    env = _check_environment(os.environ)
    token = _TOML_FILE.set(toml_path)
    try:
        return StackSettings(**dict(cli))
    except ValidationError as exc:
        origins = _Origins(cli, env, toml_path, toml_keys)
        raise SettingsError(_describe(exc, origins)) from exc
    finally:
        _TOML_FILE.reset(token)
