"""Why a request finished: the entries of an output row's ``finished_reasons``, typed.

On the wire a finish reason is a map whose ``type`` says why (SGLang's
``finished_reason``), and this module is where its shapes are written:

* ``{"type": "length", "length": N}``: the request reached its ``max_new_tokens``;
* ``{"type": "stop", "matched": m}``: a stop token id, a stop string, or ``nil`` (EOS, or
  an embedding, which finishes at once);
* ``{"type": "abort", "message": str}``: aborted (a client left, a pause in abort mode,
  a lost process).

An engine may add keys of its own and they travel untouched: workers answer HTTP clients
with the map as it came. :class:`FinishReason` is the typed view readers decide by;
:func:`length_reason`, :func:`stop_reason` and :func:`abort_reason` build the maps. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["FinishReason", "abort_reason", "length_reason", "stop_reason"]


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

    @classmethod
    def of(cls, reason: Mapping[str, Any]) -> FinishReason:
        """The typed view of a wire map; keys of the wrong type read as absent (``type``
        None when the map has no string ``type``)."""
        kind = reason.get("type")
        matched = reason.get("matched")
        length = reason.get("length")
        message = reason.get("message")
        return cls(
            type=kind if isinstance(kind, str) else None,
            matched=matched if isinstance(matched, int | str) else None,
            length=length if isinstance(length, int) and not isinstance(length, bool) else None,
            message=message if isinstance(message, str) else None,
        )

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


def length_reason(max_new_tokens: int) -> dict[str, Any]:
    """``{"type": "length", "length": max_new_tokens}``."""
    return {"type": "length", "length": max_new_tokens}


def stop_reason(matched: int | str | None) -> dict[str, Any]:
    """``{"type": "stop", "matched": matched}`` (``matched`` kept when None)."""
    return {"type": "stop", "matched": matched}


def abort_reason(message: str) -> dict[str, Any]:
    """``{"type": "abort", "message": message}``."""
    return {"type": "abort", "message": message}
