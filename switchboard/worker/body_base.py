"""What every worker request body shares: its field types, the not-supported mark, and
the unknown-field policy.

**Unknown fields.** Gateways and SDKs add fields faster than any server names them
(SGLang's own gateway sends ``model``, ``background``, ``no_logs``… to ``/generate``), so
a field no body names is, by default, *ignored*: dropped before validation and recorded
in the current :class:`UnknownFields` (the worker counts them in
``switchboard_ignored_fields_total`` and logs each new name once). With the worker setting
``reject_unknown_fields`` (:func:`unknown_fields_policy` ``reject=True``) such a field is
refused instead: a 400 naming it, "Extra inputs are not permitted". The policy reaches
validation through a context variable, because FastAPI validates bodies without a
context argument; outside a request the default (ignore, record nowhere) applies.

**Null.** ``null`` is as good as leaving a field out (OpenAI's and SGLang's optional
fields are nullable), so ``"n": null`` gets the default.

**Not supported.** A field marked :class:`NotSupported` is accepted at its default and
refused (400 ``not supported by this server: …``) otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, ClassVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "MAX_RID_CHARS",
    "Body",
    "Count",
    "NotSupported",
    "Penalty",
    "PromptInput",
    "Rid",
    "Seed",
    "TokenIds",
    "UnknownFields",
    "accepted_names",
    "unknown_fields_policy",
]

#: Bounds for integers that travel as MessagePack ints: a larger one would overflow the
#: encoder (a 500) instead of being refused (a 400).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: Longest request id a client may choose: it travels with every output row of its request.
MAX_RID_CHARS = 256

TokenIds = list[Annotated[int, Field(ge=0, le=INT32_MAX)]]
Rid = Annotated[str, Field(max_length=MAX_RID_CHARS)]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Seed = Annotated[int, Field(ge=-INT64_MAX, le=INT64_MAX)]
Penalty = Annotated[
    float, Field(ge=-2, le=2, description="passed to the engine: the llama.cpp engine applies it")
]
#: One prompt or a batch of them: text, texts, token ids, or lists of token ids.
PromptInput = str | list[str] | TokenIds | list[TokenIds]


@dataclass
class UnknownFields:
    """The unknown-field policy of one request, and what it ignored.

    ``ignored`` holds each ignored field as the client wrote it, dotted where it is
    nested (``sampling_params.foo``; ``messages.foo`` for any message)."""

    reject: bool = False
    ignored: list[str] = field(default_factory=list)


_POLICY: ContextVar[UnknownFields | None] = ContextVar("switchboard_unknown_fields", default=None)


@contextlib.contextmanager
def unknown_fields_policy(*, reject: bool = False) -> Iterator[UnknownFields]:
    """Validate bodies under this policy until the block ends; yields the record of what
    was ignored (always empty when ``reject``)."""
    policy = UnknownFields(reject=reject)
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


@dataclass(frozen=True)
class NotSupported:
    """Marks a field this stack cannot honour: accepted at its default, refused (400
    ``not supported by this server: <what>``) otherwise. A list whose every item is the
    default (SGLang's one-per-prompt form) counts as the default."""

    what: str

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        shown = handler(schema)
        shown["description"] = f"not supported ({self.what}): only the default is accepted"
        return shown


def _is_default(value: Any, default: Any) -> bool:
    if value == default:
        return True
    if default is None and value in ("", {}, []):
        return True
    return isinstance(value, list) and all(_is_default(item, default) for item in value)


@cache
def accepted_names(model: type[BaseModel]) -> frozenset[str]:
    """The keys ``model`` takes: its field names and their validation aliases."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(name)
        alias = info.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
    return frozenset(names)


class Body(BaseModel):
    """A request body or nested object of the worker: see the module docstring."""

    # forbid: under the reject policy an unknown key is left in, and pydantic refuses it
    # at its own location; under the ignore policy it is removed before it gets there.
    model_config = ConfigDict(extra="forbid")
    #: Where a nested object is in its body, as an ignored field's name shows it.
    location: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _known_and_not_null(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic refuses it with its own message
        names = accepted_names(cls)
        policy = _POLICY.get()
        reject = policy is not None and policy.reject
        kept: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                if reject:
                    kept[key] = value
                elif policy is not None:
                    policy.ignored.append(f"{cls.location}.{key}" if cls.location else key)
            elif value is not None:
                kept[key] = value
        return kept

    @field_validator("*")
    @classmethod
    def _refuse_unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        model_field = cls.model_fields[info.field_name]
        for mark in model_field.metadata:
            if isinstance(mark, NotSupported) and not _is_default(value, model_field.default):
                raise PydanticCustomError(
                    "not_supported", "not supported by this server: {what}", {"what": mark.what}
                )
        return value
