"""The stack's caps on one request, and the flags that hand them to the workers.

:class:`RequestCapSettings` is the part of :class:`~switchboard.supervisor.settings.
StackSettings` that says what one HTTP request may ask for and which bodies the workers
read (:mod:`switchboard.worker.caps`, :mod:`switchboard.worker.json_body`). Every
default is the worker's own.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field
from pydantic_settings import BaseSettings

from switchboard.worker.caps import RequestCaps
from switchboard.worker.settings import WorkerSettings

__all__ = ["RequestCapSettings", "request_cap_flags"]

_CAPS = RequestCaps()
#: The caps' names, each also the worker flag ``--<name with dashes>``.
_CAP_NAMES = tuple(field.name for field in dataclasses.fields(RequestCaps))


class RequestCapSettings(BaseSettings):
    """What one request to ``switchboard up``'s workers may ask for at most."""

    max_prompts: int = Field(
        _CAPS.max_prompts,
        ge=1,
        description="generations one request may ask for: its prompts (a batch), times n on "
        "/v1/completions; beyond, 400",
    )
    max_n: int = Field(_CAPS.max_n, ge=1, description="n (and best_of) of /v1/completions, at most")
    max_stop_strings: int = Field(
        _CAPS.max_stop_strings, ge=1, description="stop strings of one request, at most"
    )
    max_stop_chars: int = Field(
        _CAPS.max_stop_chars, ge=1, description="characters of one stop string, at most"
    )
    max_stop_token_ids: int = Field(
        _CAPS.max_stop_token_ids, ge=1, description="stop token ids of one request, at most"
    )
    max_request_tokens: int = Field(
        _CAPS.max_request_tokens,
        ge=1,
        description="prompt tokens plus max new tokens, summed over one request's generations",
    )
    accept_any_content_type: bool = Field(
        WorkerSettings.accept_any_content_type,
        description="the workers read any request body as JSON, whatever its Content-Type "
        "(or none) says, for old clients; off: a body not declared application/json gets 415",
    )
    reject_unknown_fields: bool = Field(
        WorkerSettings.reject_unknown_fields,
        description="the workers answer 400 to a body field no endpoint names; off: such a "
        "field is ignored and counted in switchboard_ignored_fields_total",
    )


def request_cap_flags(settings: RequestCapSettings) -> tuple[str, ...]:
    """The flags handing ``settings`` to a worker."""
    flags = [
        word
        for name in _CAP_NAMES
        for word in ("--" + name.replace("_", "-"), str(getattr(settings, name)))
    ]
    if settings.accept_any_content_type:
        flags.append("--accept-any-content-type")
    if settings.reject_unknown_fields:
        flags.append("--reject-unknown-fields")
    return tuple(flags)
