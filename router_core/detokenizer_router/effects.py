"""What the detokenizer router's core asks of its shell, as data.

The core (:mod:`~router_core.detokenizer_router.core`) decides and returns a list of
effects; the shell (:mod:`~router_core.detokenizer_router.router`) carries them out in
the order given: a batch's pieces go out before the assignment they grew is saved.
Time comes in as the tokenizer router's :class:`Instant` (``mono`` for the beacon's
schedule, ``wall`` for hop latencies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from router_core.tokenizer_router.effects import Instant

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["Beacon", "Effect", "Instant", "SaveAssignment", "Send"]


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frames`` to detokenizer ``to`` (its index in the endpoints).

    Once the message is sent (or queued in the destination's backlog) ``counter``
    (name, label, amount) is added and ``traffic`` counted: one message of ``nbytes`` on
    route ``detokenize`` per ``(owner address, nbytes)``. A message the destination
    drops is counted there instead.
    """

    to: int
    frames: Sequence[FrameLike]
    counter: tuple[str, str, int] | None = None
    traffic: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SaveAssignment:
    """Save the worker assignment ``assigned`` (address -> detokenizer index) to the
    state file, if the router has one."""

    assigned: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Beacon:
    """Tell the tokenizer router this incarnation with ``frames``, unless its socket
    has a backlog (beacons repeat: the next replaces this one); counted ``beacons`` sent."""

    frames: Sequence[FrameLike]


#: Anything the core may ask for.
Effect = Send | SaveAssignment | Beacon
