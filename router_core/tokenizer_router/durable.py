"""What a tokenizer router keeps across its own restarts, and the file it keeps it in.

An operator's pause or drain must survive the router process: the pause state (paused,
mode, operation id, since), the drain marks and the operation counter are a
:class:`DurableState`, written to the state file in the run directory before any
broadcast of the change goes out, and read back by the next start. The next start takes
a larger incarnation (:func:`next_incarnation`), so its operations order after every
operation of the router it replaces, on every worker and in the engine.

:class:`DrainMarks` is the pure, bounded set of drained worker ids. :class:`StateFile`
reads and writes the file, whole or not at all
(:func:`~router_core.atomic_file.write_atomic`); it is private (0600).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import msgspec

from router_core.atomic_file import remove_stale_temporaries, write_atomic
from router_core.wire.control import PauseMode

__all__ = ["MAX_DRAIN_MARKS", "DrainMarks", "DurableState", "StateFile", "next_incarnation"]

logger = logging.getLogger(__name__)

#: Drained worker ids remembered at most (beyond it the oldest mark is forgotten).
MAX_DRAIN_MARKS: Final = 4096

#: The state file's format; a file of another version is not read.
STATE_VERSION: Final = 1


class DurableState(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A router's state that outlives its process.

    ``seq`` is the last operation sequence number handed out; ``since`` the Unix time the
    pause state last changed (None before any change); ``drained`` the drained worker ids,
    oldest first; ``weight_version`` and ``weight_model`` the weights serving.
    """

    version: int = STATE_VERSION
    incarnation: int
    paused: bool = False
    mode: PauseMode | None = None
    op_id: str = ""
    seq: int = 0
    since: float | None = None
    drained: list[str] = msgspec.field(default_factory=list)
    #: The weights the last successful ``update_weights`` loaded ("": the engine's own).
    weight_version: str = ""
    weight_model: str = ""
    #: An update paused generation and has not continued it yet (the router died
    #: meanwhile): the next start continues once the engine is live.
    resume_owed: bool = False


def next_incarnation(previous: DurableState | None, now_ns: int) -> int:
    """This start's incarnation: the Unix time in ns, but always above the previous one
    (a clock stepped back must not make a newer router look older)."""
    if previous is None:
        return max(1, now_ns)
    return max(now_ns, previous.incarnation + 1)


class DrainMarks:
    """Worker ids an operator drained and did not undrain, oldest first, bounded."""

    def __init__(self, marked: Iterable[str] = (), *, limit: int = MAX_DRAIN_MARKS) -> None:
        if limit <= 0:
            raise ValueError("limit must be positive")
        self.limit = limit
        self._marks: OrderedDict[str, None] = OrderedDict()
        for worker_id in marked:
            self.mark(worker_id)

    def __contains__(self, worker_id: object) -> bool:
        return worker_id in self._marks

    def __len__(self) -> int:
        return len(self._marks)

    def mark(self, worker_id: str) -> None:
        """Remember ``worker_id`` as drained (forgetting the oldest mark beyond the limit)."""
        self._marks[worker_id] = None
        self._marks.move_to_end(worker_id)
        while len(self._marks) > self.limit:
            self._marks.popitem(last=False)

    def unmark(self, worker_id: str) -> None:
        """Forget ``worker_id``'s mark (undrained, or it left cleanly)."""
        self._marks.pop(worker_id, None)

    def ids(self) -> list[str]:
        """The marked worker ids, oldest first."""
        return list(self._marks)


class StateFile:
    """The router's state file: :meth:`load` at start, :meth:`save` on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> DurableState | None:
        """The saved state, or None when there is none or it cannot be read.

        A file that does not decode is logged (naming the file and the error) and moved
        aside to ``<name>.unreadable`` for inspection; the router then starts afresh.
        Temporary files a router killed mid-save left behind are removed.
        """
        remove_stale_temporaries(self.path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.error(
                "router state file %s cannot be read (%s); starting afresh", self.path, exc
            )
            return None
        try:
            state = msgspec.json.decode(data, type=DurableState)
        except msgspec.DecodeError as exc:
            aside = self.path.with_name(self.path.name + ".unreadable")
            logger.error(
                "router state file %s is unreadable (%s); moved to %s, starting afresh",
                self.path,
                exc,
                aside,
            )
            os.replace(self.path, aside)
            return None
        if state.version != STATE_VERSION:
            logger.error(
                "router state file %s has version %d (this router reads %d); starting afresh",
                self.path,
                state.version,
                STATE_VERSION,
            )
            return None
        return state

    def save(self, state: DurableState) -> None:
        """Replace the file with ``state`` atomically and durably; raises ``OSError``."""
        write_atomic(self.path, msgspec.json.encode(state))

    def remove(self) -> None:
        """Delete the file (a fresh stack starts with no state); no error if absent."""
        self.path.unlink(missing_ok=True)
