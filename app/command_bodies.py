"""Each command's request body as a pydantic model, generated from its arguments.

A command's arguments are its struct's fields (:mod:`router_core.control.command_args`);
FastAPI validates a body against the model made here, so ``/openapi.json`` documents it
and a bad body is a 400 worded as every other (:mod:`app.errors`), then the model's data
becomes the struct the router is sent. Two models per command: the strict one of its
admin path refuses a field it does not have; the lenient one of SGLang's alias paths
ignores such fields (what SGLang's tooling sends is accepted) and takes SGLang's names
for ours (:attr:`~router_core.control.command_model.Http.renames`).

Values are strict: a JSON number for a number, ``true``/``false`` for a flag (``"1"``
would otherwise pass as one); integers are fine for a number.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, create_model

from app.catalogue import Command
from router_core.control.command_model import Argument

__all__ = ["body_model"]

_SCALARS: dict[str, type] = {"str": str, "bool": bool, "int": int, "float": float}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def _annotation(argument: Argument) -> Any:
    # No null over HTTP, even where the struct takes one (the router's own default):
    # an operator names a value or leaves the field out.
    return Literal[argument.choices] if argument.choices else _SCALARS[argument.type]


def _field(argument: Argument, renamed_from: tuple[str, ...]) -> Any:
    options: dict[str, Any] = {"description": argument.summary or None}
    if not argument.choices:  # a Literal is exact already
        options["strict"] = True
    if argument.above is not None:
        options["gt"] = argument.above
    if argument.at_most is not None:
        options["le"] = argument.at_most
    if argument.max_length is not None:
        options["max_length"] = argument.max_length
    if renamed_from:
        options["validation_alias"] = AliasChoices(argument.name, *renamed_from)
    if argument.required:
        return Field(**options)
    return Field(default=argument.default, **options)


@functools.cache
def body_model(entry: Command, *, lenient: bool) -> type[BaseModel]:
    """The body model of ``entry``'s admin path, or (``lenient``) of its SGLang aliases."""
    renames = entry.route.renames if lenient else {}
    fields: dict[str, Any] = {
        argument.name: (
            _annotation(argument),
            _field(argument, tuple(old for old, new in renames.items() if new == argument.name)),
        )
        for argument in entry.body_arguments()
    }
    name = "".join(part.title() for part in entry.name.split("_"))
    return create_model(
        f"{name}{'Sglang' if lenient else ''}Request",
        __base__=_Lenient if lenient else _Strict,
        __doc__=f"``{entry.method} {entry.path}``: {entry.summary}.",
        **fields,
    )
