"""What the tokenizer router's handlers ask of its shell, as data.

The handlers decide and return a list of effects; the shell (:mod:`router.py`) carries
them out in the order given. Order matters: a worker that takes over another worker's
return address gets its registration reply after the old socket is closed.

An :class:`Instant` is the shell's time, handed to every handler: the monotonic clock
for durations and deadlines, the Unix clock for what operators read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from router_core.control.protocol import ErrorCode
from router_core.control.replies import OperationOutcome
from router_core.control.table import ReplyTo
from router_core.tokenizer_router.durable import DurableState

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = [
    "Answer",
    "Effect",
    "Fail",
    "Forget",
    "FreezeGarbageCollector",
    "Instant",
    "Persist",
    "Send",
]


@dataclass(frozen=True, slots=True)
class Instant:
    """One moment on both clocks: ``mono`` (monotonic seconds) and ``wall`` (Unix seconds)."""

    mono: float
    wall: float


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frames`` to ``to``: a worker's return address, or ``ENGINE``.

    Once the message is sent (or queued in the destination's backlog), ``traffic``
    (route, worker id) counts one message of its size and ``counter`` (name, label,
    amount) is added; a message the destination drops is counted there instead.
    ``once``: the router keeps no socket for this peer (an unknown worker is told to
    register again through a throwaway socket).
    """

    to: str
    frames: Sequence[FrameLike]
    traffic: tuple[str, str] | None = None
    counter: tuple[str, str, int] | None = None
    once: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer the control request ``waiter`` with ``outcome`` (a barrier finished, or
    the engine answered a command: the command's reply struct)."""

    waiter: ReplyTo
    outcome: OperationOutcome | msgspec.Struct


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer the control request ``waiter`` with the error ``code`` and ``message``."""

    waiter: ReplyTo
    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Forget:
    """Close the socket to a worker's ``address``; what is queued there is dropped as
    ``reason``."""

    address: str
    reason: str


@dataclass(frozen=True, slots=True)
class FreezeGarbageCollector:
    """Freeze this process's garbage collector (``gc.freeze()``)."""


@dataclass(frozen=True, slots=True)
class Persist:
    """Save ``state`` to the state file (if the router has one) before the effects that
    follow: a broadcast never goes out ahead of the state it announces."""

    state: DurableState


#: Anything a handler may ask for.
Effect = Send | Answer | Fail | Forget | FreezeGarbageCollector | Persist
