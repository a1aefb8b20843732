"""The argument structs of the operator commands, each field's help written once.

Each field is an argument of every surface the command has (the JSON body or path of
its admin route, a flag of its subcommand, a console input, a row of the docs' table):
its type, default, bounds and ``description`` are read from here
(:func:`router_core.control.command_model.arguments_of`). Structs refuse fields they do
not have; a route that serves SGLang's name for a command drops the fields SGLang sends
that mean nothing here before it decodes. Wire shapes: ``docs/protocol.md`` 6.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from router_core.limits import DEFAULT_BARRIER_TIMEOUT_S, MAX_BARRIER_TIMEOUT_S, MAX_RID_CHARS
from router_core.wire.control import PauseMode

__all__ = [
    "DEFAULT_PAUSE_MODE",
    "AbortArgs",
    "ContinueArgs",
    "FlushCacheArgs",
    "ListWorkersArgs",
    "NoArgs",
    "PauseArgs",
    "UpdateWeightsArgs",
    "WorkerArgs",
]

#: The mode of a pause that names none (SGLang's default).
DEFAULT_PAUSE_MODE: Final = "abort"

#: Seconds a barrier may wait: ``0 < timeout_s <= MAX_BARRIER_TIMEOUT_S`` (600).
Timeout = Annotated[
    float,
    msgspec.Meta(
        gt=0,
        le=MAX_BARRIER_TIMEOUT_S,
        description="seconds every worker and the engine get to acknowledge",
        # What the admin API and the CLI send when the caller names none; on the
        # control socket an absent timeout_s is the router's own --barrier-timeout-s.
        extra={"offered_default": DEFAULT_BARRIER_TIMEOUT_S},
    ),
]


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class ListWorkersArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"include_departed": bool}``."""

    include_departed: Annotated[
        bool, msgspec.Meta(description="also list workers that left recently, as dead")
    ] = False


class WorkerArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"worker_id": str}``."""

    worker_id: Annotated[str, msgspec.Meta(description="the worker's id")]


class PauseArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"mode": "abort"|"retract"|"in_place", "timeout_s": float}``; a ``timeout_s`` of
    ``null`` is the router's own (``barrier_timeout_s``)."""

    mode: Annotated[
        PauseMode,
        msgspec.Meta(
            description="abort: in-flight requests end with finish reason abort; retract: "
            "they go back to the engine's queue and finish after continue; in_place: they "
            "freeze where they are"
        ),
    ] = DEFAULT_PAUSE_MODE
    timeout_s: Timeout | None = None


class ContinueArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"timeout_s": float}`` (``null``: the router's own)."""

    timeout_s: Timeout | None = None


#: Seconds the engine gets to answer a command it carries out.
EngineTimeout = Annotated[
    float,
    msgspec.Meta(gt=0, le=MAX_BARRIER_TIMEOUT_S, description="seconds the engine gets to answer"),
]


class FlushCacheArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"timeout_s": float}``."""

    timeout_s: EngineTimeout = 10.0


class UpdateWeightsArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"model": str, "version": str, "mode": ..., "timeout_s": float}``: one barrier
    that pauses in ``mode``, has the engine load ``model`` as ``version``, and continues."""

    model: Annotated[
        str,
        msgspec.Meta(
            max_length=4096,
            description="the weights to load (the llama.cpp engine: a GGUF file on the "
            "engine's host); empty: the engine's own (the built-in engine takes none)",
        ),
    ] = ""
    version: Annotated[
        str,
        msgspec.Meta(
            max_length=128,
            description="the name every response gives the new weights "
            "(meta_info.weight_version); empty: the file's name",
        ),
    ] = ""
    mode: Annotated[
        PauseMode,
        msgspec.Meta(
            description="how requests in flight wait: retract (re-prefilled under the new "
            "weights), in_place (kept as they are) or abort (ended)"
        ),
    ] = "retract"
    timeout_s: Annotated[
        float,
        msgspec.Meta(
            gt=0,
            le=MAX_BARRIER_TIMEOUT_S,
            description="seconds each step (the pause, the load, the continue) may take",
        ),
    ] = 60.0


class AbortArgs(msgspec.Struct, forbid_unknown_fields=True):
    """``{"rid": str, "abort_all": bool}``: one request by its id, or with ``abort_all``
    every request in the engine (``rid`` is then ignored)."""

    rid: Annotated[
        str,
        msgspec.Meta(
            max_length=MAX_RID_CHARS,
            description="the request id to abort, as the client gave it (each sample of "
            "n > 1 has its own, <rid>_<i>)",
        ),
    ] = ""
    abort_all: Annotated[
        bool, msgspec.Meta(description="abort every request in the engine (rid is ignored)")
    ] = False
