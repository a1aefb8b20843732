"""Why a request finished: the entries of an output row's ``finished_reasons``, typed.

On the wire a finish reason is a map whose ``type`` says why (SGLang's
``finished_reason``), and this module is where its shapes are written:

* ``{"type": "length", "length": N}``: the request reached its ``max_new_tokens``;
* ``{"type": "stop", "matched": m}``: a stop token id, a stop string, or ``nil`` (EOS, or
  an embedding, which finishes at once);
* ``{"type": "abort", "message": str}``: aborted (a client left, a pause in abort mode);
* ``{"type": "abort", "message": str, "status_code": 503, "err_type": cause}``: lost to a
  fault (a process died, rows were lost, no output within the idle bound) or refused
  for want of room (the engine's waiting queue is full). ``cause`` names it in one word
  (:data:`LOST_CAUSES`); workers answer such a request with an error of that status,
  never with the partial text as a success.

An engine may add keys of its own and they travel untouched: workers answer HTTP clients
with the map as it came. :class:`FinishReason` is the typed view readers decide by;
:func:`length_reason`, :func:`stop_reason` and :func:`abort_reason` build the maps. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = [
    "LOST_CAUSES",
    "LOST_STATUS",
    "FinishReason",
    "abort_reason",
    "length_reason",
    "lost_reason",
    "stop_reason",
]

#: The HTTP status of a request lost to a fault: the service failed, retrying may work.
LOST_STATUS = 503

#: Why a request can be lost, as ``err_type`` says it.
LOST_CAUSES = frozenset(
    {
        "engine_restarted",
        "rows_lost",
        "detokenizer_state_lost",
        "idle_timeout",
        "engine_queue_full",
        "control_unreachable",
    }
)


class FinishReason(msgspec.Struct, frozen=True, kw_only=True):
    """A finish reason as its reader sees it: ``type`` and the fields of that type.

    ``type`` is ``length``, ``stop`` or ``abort`` from Switchboard's processes; an engine
    of one's own may send another word (or none: ``None``), and each reader picks what
    that means to it.
    """

    type: str | None
    #: ``stop``: the stop token id or stop string that matched (None: EOS or none).
    matched: int | str | None = None
    #: ``length``: the ``max_new_tokens`` reached.
    length: int | None = None
    #: ``abort``: why, in words.
    message: str | None = None
    #: ``abort`` of a request lost to a fault: the HTTP status to answer with, and the
    #: cause in one word (see :func:`lost_reason`); None for any other finish.
    status_code: int | None = None
    err_type: str | None = None

    @classmethod
    def of(cls, reason: Mapping[str, Any]) -> FinishReason:
        """The typed view of a wire map; keys of the wrong type read as absent (``type``
        None when the map has no string ``type``)."""
        kind = reason.get("type")
        matched = reason.get("matched")
        length = reason.get("length")
        message = reason.get("message")
        status, err_type = reason.get("status_code"), reason.get("err_type")
        return cls(
            type=kind if isinstance(kind, str) else None,
            matched=matched if isinstance(matched, int | str) else None,
            length=_integer(length),
            message=message if isinstance(message, str) else None,
            status_code=_integer(status),
            err_type=err_type if isinstance(err_type, str) else None,
        )

    @property
    def lost(self) -> bool:
        """Whether this is an abort of a request lost to a fault (it has a status)."""
        return self.type == "abort" and self.status_code is not None

    @property
    def stop_token(self) -> int | None:
        """The stop token id that matched (a ``stop`` with an integer ``matched``)."""
        matched = self.matched
        if self.type != "stop" or not isinstance(matched, int) or isinstance(matched, bool):
            return None
        return matched

    @property
    def stop_string(self) -> str | None:
        """The stop string that matched (a ``stop`` with a non-empty string ``matched``)."""
        matched = self.matched
        return matched if self.type == "stop" and isinstance(matched, str) and matched else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def length_reason(max_new_tokens: int) -> dict[str, Any]:
    """``{"type": "length", "length": max_new_tokens}``."""
    return {"type": "length", "length": max_new_tokens}


def stop_reason(matched: int | str | None) -> dict[str, Any]:
    """``{"type": "stop", "matched": matched}`` (``matched`` kept when None)."""
    return {"type": "stop", "matched": matched}


def abort_reason(message: str) -> dict[str, Any]:
    """``{"type": "abort", "message": message}``."""
    return {"type": "abort", "message": message}


def lost_reason(cause: str, message: str) -> dict[str, Any]:
    """The abort of a request lost to a fault: ``cause`` (one of :data:`LOST_CAUSES`) as
    ``err_type``, :data:`LOST_STATUS` as ``status_code``, ``message`` naming what failed."""
    if cause not in LOST_CAUSES:
        raise ValueError(f"unknown cause {cause!r}")
    return {"type": "abort", "message": message, "status_code": LOST_STATUS, "err_type": cause}
