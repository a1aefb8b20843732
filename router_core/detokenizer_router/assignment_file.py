"""The detokenizer router's state file: which worker goes to which detokenizer.

A detokenizer keeps each request's decoding state, so a detokenizer router that
restarted and assigned the workers afresh would move requests in flight to detokenizers
that never saw them, and every one would end with ``detokenizer_state_lost``. With this
file a restarted router routes each worker where it went before; only rows lost in the
dead router's queues are lost (and caught by the continuity checks).

The file is JSON ``{"version": 1, "detokenizers": M, "assigned": {address: index}}``,
written whole (:func:`~router_core.atomic_file.write_atomic`) when a new worker is
assigned. One written for another number of detokenizers is not used.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import msgspec

from router_core.atomic_file import remove_stale_temporaries, write_atomic

__all__ = ["AssignmentFile"]

logger = logging.getLogger(__name__)

#: The file's format; a file of another version is not read.
VERSION: Final = 1


class _Assignment(msgspec.Struct, kw_only=True):
    version: int = VERSION
    detokenizers: int
    assigned: dict[str, int]


class AssignmentFile:
    """Load at start, save on every new assignment."""

    def __init__(self, path: Path, detokenizers: int) -> None:
        self.path = path
        self.detokenizers = detokenizers

    def load(self) -> dict[str, int]:
        """The saved assignment; empty when there is none, it cannot be read (logged,
        naming the file), or it was made for another number of detokenizers."""
        remove_stale_temporaries(self.path)
        try:
            saved = msgspec.json.decode(self.path.read_bytes(), type=_Assignment)
        except FileNotFoundError:
            return {}
        except (OSError, msgspec.DecodeError) as exc:
            logger.error(
                "detokenizer router state file %s unreadable (%s); ignored", self.path, exc
            )
            return {}
        if saved.version != VERSION or saved.detokenizers != self.detokenizers:
            logger.warning(
                "detokenizer router state file %s is for %d detokenizers (now %d); ignored",
                self.path,
                saved.detokenizers,
                self.detokenizers,
            )
            return {}
        return saved.assigned

    def save(self, assigned: dict[str, int]) -> None:
        """Replace the file with ``assigned``; raises ``OSError``."""
        state = _Assignment(detokenizers=self.detokenizers, assigned=assigned)
        write_atomic(self.path, msgspec.json.encode(state))
