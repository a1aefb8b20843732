"""Flags generated from a process's settings dataclass.

Each field declared with :func:`router_core.settings_fields.flagged` becomes one flag
whose destination is the field's name, whose default is the field's default (or which
is required when the field has none), whose value is checked by the validator its type
and bound name, and whose old spellings are extra option strings of the same flag. So
a default, a bound or a help text is written once, in the settings.
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import sys
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from router_core.settings_fields import Bound, flag_specs
from switchboard.cli.support import (
    UsageError,
    non_negative_float,
    non_negative_int,
    port,
    positive_float,
    positive_int,
)

__all__ = ["VALIDATORS", "add_settings_flags", "loop_settings", "settings_values"]

SettingsT = TypeVar("SettingsT")

#: The argparse ``type`` of a field, by its annotation and bound.
VALIDATORS: dict[tuple[type, Bound | None], Callable[[str], Any]] = {
    (float, "positive"): positive_float,
    (float, "non_negative"): non_negative_float,
    (int, "positive"): positive_int,
    (int, "non_negative"): non_negative_int,
    (int, "port"): port,
    (int, None): int,
    (str, None): str,
}


def _default_text(default: object) -> str:
    return "required" if default is dataclasses.MISSING else f"default {default}"


def _field_type(settings_class: type, field: dataclasses.Field[Any]) -> Any:
    """A flagged field's type: its annotation names a builtin or an alias of its module.

    Resolved by name rather than with :func:`typing.get_type_hints`, so that the other
    fields may name types their module imports for type checking only.
    """
    if not isinstance(field.type, str):
        return field.type
    namespace = {**vars(builtins), **vars(sys.modules[settings_class.__module__])}
    if field.type not in namespace:
        raise TypeError(f"{settings_class.__name__}.{field.name}: cannot resolve {field.type!r}")
    return namespace[field.type]


def add_settings_flags(parser: argparse.ArgumentParser, settings_class: type) -> None:
    """Add a flag to ``parser`` for each flagged field of the dataclass ``settings_class``.

    A duration (a field ending in ``_s``) shows its value as ``S``. :class:`TypeError`
    for a field whose type and bound have no validator (a programming error).
    """
    for field, spec in flag_specs(settings_class):
        kind = _field_type(settings_class, field)
        options: dict[str, Any] = {}
        if typing.get_origin(kind) is Literal:
            options["choices"] = typing.get_args(kind)
        else:
            validator = VALIDATORS.get((kind, spec.bound))
            if validator is None:
                raise TypeError(f"{settings_class.__name__}.{field.name}: no flag for {kind}")
            options["type"] = validator
        if field.name.endswith("_s"):
            options["metavar"] = "S"
        required = field.default is dataclasses.MISSING
        help_text = f"{spec.help} ({_default_text(field.default)})"
        parser.add_argument(
            spec.option(field.name),
            *spec.aliases,
            dest=field.name,
            required=required,
            default=None if required else field.default,
            help=help_text.replace("%", "%%"),
            **options,
        )


def settings_values(args: argparse.Namespace, settings_class: type) -> dict[str, Any]:
    """The flagged fields of ``settings_class`` as ``args`` holds them, by field name."""
    return {field.name: getattr(args, field.name) for field, _ in flag_specs(settings_class)}


def loop_settings(
    settings_class: type[SettingsT], args: argparse.Namespace, **given: Any
) -> SettingsT:
    """A loop process's settings: its flagged fields and the common queue flags
    (``--hwm``, ``--backlog``, ``--allow-remote``) from ``args``, and ``given``.

    :class:`UsageError` (one line) for a combination the settings refuse.
    """
    # A settings dataclass takes keywords; type[T] alone tells mypy nothing of them.
    build: Callable[..., SettingsT] = settings_class
    try:
        return build(
            hwm=args.hwm,
            backlog_limit=args.backlog,
            allow_remote=args.allow_remote,
            **given,
            **settings_values(args, settings_class),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
