"""Where the stack's settings come from: a setting's names, the TOML file, the environment.

A setting named ``drain_timeout_s`` is the TOML key ``drain_timeout_s``, the variable
``SWITCHBOARD_DRAIN_TIMEOUT_S`` and the flag ``--drain-timeout-s``. A renamed setting
keeps its old name as an alias in all three places (``step_time`` for ``step_time_s``).
The readers here check every key and variable against those names, map old names to
new ones, and remember how each value was spelt, so that an error names it as the
operator wrote it. Everything refused is one :class:`SettingsError`, one line.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from switchboard.cli.parsing import did_you_mean

__all__ = [
    "ENV_PREFIX",
    "FOREIGN_ENV",
    "SECRET_FIELDS",
    "EnvironmentValues",
    "Origins",
    "SettingNames",
    "SettingsError",
    "TomlValues",
    "describe_invalid",
    "env_name",
    "flag_name",
    "read_environment",
    "read_toml",
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
        # The fault suite's soak switch and figures file (docs/reliability.md): set for a
        # whole `make test` or `make soak`, whose tests read the settings in-process.
        "SWITCHBOARD_SOAK",
        "SWITCHBOARD_FAULT_FIGURES",
    }
)

#: Settings holding secrets: an error names where they came from, never their value.
SECRET_FIELDS = frozenset({"admin_operator_tokens", "admin_viewer_tokens", "api_key"})


class SettingsError(Exception):
    """A setting Switchboard refuses; the message is one line for the operator."""


def env_name(setting: str) -> str:
    """The environment variable of setting (or old name) ``setting``."""
    return f"{ENV_PREFIX}{setting.upper()}"


def flag_name(setting: str) -> str:
    """The command-line flag of setting (or old name) ``setting``."""
    return "--" + setting.replace("_", "-")


def _toml_text(value: object) -> str:
    """``value`` as a TOML file writes it: ``"text"``, ``true``, ``4``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, os.PathLike)):
        return json.dumps(os.fspath(value), ensure_ascii=False)
    return str(value)


@dataclass(frozen=True)
class SettingNames:
    """A settings model's field names and the old names still accepted for some."""

    fields: Collection[str]
    #: Old name -> the field it now is.
    renamed: Mapping[str, str] = field(default_factory=dict)
    #: The fields a TOML table sets (``[engine_env]``); every other field takes a value.
    tables: Collection[str] = ()

    def field_of(self, name: str) -> str | None:
        """The field ``name`` (a field or an old name) sets, or None."""
        return name if name in self.fields else self.renamed.get(name)

    def spellings(self) -> list[str]:
        """Every accepted name: fields, then old names."""
        return [*self.fields, *self.renamed]


def _once(found: dict[str, str], setting: str, spelt: str, where: str) -> None:
    if setting in found:
        raise SettingsError(f"{where}: {found[setting]} and {spelt} are the same setting")
    found[setting] = spelt


@dataclass(frozen=True)
class TomlValues:
    """A TOML file's values by field, and the key each was written under."""

    path: Path
    values: dict[str, Any]
    spelt: dict[str, str]


def read_toml(path: Path, names: SettingNames) -> TomlValues:
    """The settings in the TOML file ``path``; :class:`SettingsError` for a missing or
    malformed file, an unknown key, a table, or one setting given under two names."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as exc:
        raise SettingsError(f"config file {path}: not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"config file {path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: not valid TOML: {exc}") from exc
    values: dict[str, Any] = {}
    spelt: dict[str, str] = {}
    for key, value in data.items():
        setting = names.field_of(key)
        if setting is None:
            hint = did_you_mean(key, names.spellings())
            raise SettingsError(f"config file {path}: unknown key {key!r}{hint}")
        if isinstance(value, dict) and setting not in names.tables:
            raise SettingsError(f"config file {path}: {key} must be a value, not a table")
        _once(spelt, setting, key, f"config file {path}")
        values[setting] = value
    return TomlValues(path, values, spelt)


@dataclass(frozen=True)
class EnvironmentValues:
    """The settings the environment gives: each one's variable as spelt, and the values
    given under old names (the variables of current names pydantic reads itself)."""

    spelt: dict[str, str]
    renamed_values: dict[str, str]
    #: Each setting's value as the variable holds it, to name it as the operator wrote it.
    values: dict[str, str] = field(default_factory=dict)


def read_environment(environ: Mapping[str, str], names: SettingNames) -> EnvironmentValues:
    """The ``SWITCHBOARD_*`` settings in ``environ`` (empty ones ignored);
    :class:`SettingsError` for an unknown ``SWITCHBOARD_*`` variable or one setting
    given under two names."""
    known = {env_name(name): name for name in names.spellings()}
    spelt: dict[str, str] = {}
    renamed_values: dict[str, str] = {}
    values: dict[str, str] = {}
    for variable, value in environ.items():
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in FOREIGN_ENV:
            continue
        if upper not in known:
            hint = did_you_mean(upper, sorted(known))
            raise SettingsError(f"unknown environment variable {variable}{hint}")
        if value == "":
            continue
        name = known[upper]
        setting = names.field_of(name)
        assert setting is not None  # every known variable names a setting
        _once(spelt, setting, variable, "environment")
        values[setting] = value
        if name != setting:
            renamed_values[setting] = value
    return EnvironmentValues(spelt, renamed_values, values)


@dataclass(frozen=True)
class Origins:
    """Where each given value came from, to name it in an error as the operator wrote it."""

    cli: Collection[str]
    environment: EnvironmentValues
    toml: TomlValues | None

    def of(self, setting: str, value: object) -> str:
        """``setting`` given ``value``, as the operator wrote it: a flag (``--port 9000``),
        a variable (``SWITCHBOARD_PORT=9000``) or a TOML key (``stack.toml: port = 9000``,
        the file's own value); else its default (``port 8000 (default)``)."""
        secret = setting in SECRET_FIELDS
        if secret:
            value = "(hidden)"
        if setting in self.cli:
            return f"{flag_name(setting)} {value}"
        if setting in self.environment.spelt:
            shown = value if secret else self.environment.values.get(setting, value)
            return f"{self.environment.spelt[setting]}={shown}"
        if self.toml is not None and setting in self.toml.spelt:
            written = "(hidden)" if secret else _toml_text(self.toml.values[setting])
            return f"{self.toml.path}: {self.toml.spelt[setting]} = {written}"
        return f"{setting} {value} (default)"


def describe_invalid(error: ValidationError, origins: Origins) -> str:
    """``error`` (the settings' validation) as one line, each value named as the operator
    gave it (:meth:`Origins.of`); an unknown key is ``unknown setting NAME``."""
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
