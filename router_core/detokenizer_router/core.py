"""The detokenizer router's core: its state and routing decisions, and no sockets.

:class:`DetokenizerRouterCore` holds the picker (which detokenizer each worker or request
goes to), the counters and the traffic statistics. :meth:`~DetokenizerRouterCore.on_message`
takes one message that :func:`router_core.inbound.accept` validated and the time, and
returns the effects for the shell to carry out:

* a batch (``TOKEN_BATCH``, ``STR_BATCH``, ``EMBEDDING_BATCH``): one
  :class:`~router_core.detokenizer_router.effects.Send` per destination detokenizer,
  its rows regrouped (never decoded, :func:`~router_core.wire.regroup.regroup`), in the
  picker's order; then a ``SaveAssignment`` when the batch grew the worker assignment;
* ``FREEZE_GC`` and ``IDLE``: the same frames to every detokenizer, counted under
  ``broadcast``;
* any other kind: nothing, counted ``rejected{unexpected_kind}``.

:meth:`~DetokenizerRouterCore.tick` runs the incarnation beacon's schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from router_core.beacon import IncarnationBeacon
from router_core.counters import Counters
from router_core.detokenizer_router.effects import Beacon, Effect, Instant, SaveAssignment, Send
from router_core.detokenizer_router.picker import DetokenizerPicker, StickyKey
from router_core.traffic import DETOKENIZE, TrafficStats
from router_core.wire import BATCH_KINDS, Header, Kind
from router_core.wire.regroup import regroup

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["BROADCAST_KINDS", "DetokenizerRouterCore"]

#: Kinds every detokenizer gets, whole.
BROADCAST_KINDS: Final = frozenset({Kind.FREEZE_GC, Kind.IDLE})


class DetokenizerRouterCore:
    """Routes rows to ``count`` detokenizers by ``sticky_key``.

    ``assigned`` is a saved worker assignment to start from (a restart's); ``beacon``
    says this incarnation to the tokenizer router (None: the router has none to tell).
    """

    def __init__(
        self,
        count: int,
        sticky_key: StickyKey = "worker",
        *,
        assigned: Mapping[str, int] | None = None,
        beacon: IncarnationBeacon | None = None,
    ) -> None:
        self.count = count
        self.counters = Counters()
        #: Traffic on route ``detokenize`` is keyed by the rows' owner *address*: this
        #: router has no registry; the admin app maps addresses to worker ids.
        self.traffic = TrafficStats()
        self.picker = DetokenizerPicker(count, sticky_key, assigned)
        self.beacon = beacon

    def on_message(self, header: Header, frames: list[FrameLike], at: Instant) -> list[Effect]:
        """Route one validated message read at ``at``; the effects, in order."""
        kind = header.kind
        if kind in BROADCAST_KINDS:
            self.counters.add("broadcast", kind.name.lower())
            return [Send(index, frames) for index in range(self.count)]
        if kind not in BATCH_KINDS:
            self.counters.add("rejected", "unexpected_kind")
            return []
        self.traffic.observe_hop(DETOKENIZE, header.sent_ns, now_ns=int(at.wall * 1e9))
        self.traffic.split_rows.observe(DETOKENIZE, len(header.rids))
        effects: list[Effect] = [
            self._piece(header, frames, index, rows)
            for index, rows in self.picker.group(header.rids, header.reply_to).items()
        ]
        if self.picker.take_changed():
            effects.append(SaveAssignment(self.picker.assignments()))
        return effects

    def _piece(self, header: Header, frames: list[FrameLike], index: int, rows: list[int]) -> Send:
        """The message of ``rows`` for detokenizer ``index``, with its bytes per owner."""
        sizes: dict[str, int] = {}
        owners = header.reply_to
        for row in rows:
            owner = owners[row]
            sizes[owner] = sizes.get(owner, 0) + len(frames[row + 1])
        return Send(
            index,
            regroup(header, frames, rows),
            counter=("routed_rows", f"detokenizer-{index}", len(rows)),
            traffic=tuple(sizes.items()),
        )

    def next_due(self) -> float | None:
        """When a timer is next due (monotonic; None: no timer). Cheap, so the shell
        asks it every loop iteration."""
        return None if self.beacon is None else self.beacon.next_due()

    def tick(self, at: Instant) -> tuple[list[Effect], float | None]:
        """The beacon, when due at ``at``, and when the next one is (None: no beacon)."""
        beacon = self.beacon
        if beacon is None:
            return [], None
        frames = beacon.due(at.mono)
        return ([] if frames is None else [Beacon(frames)]), beacon.next_due()

    def workers_per_detokenizer(self) -> list[int] | None:
        """How many workers each detokenizer serves (None when not sticky per worker)."""
        picker = self.picker
        if picker.key != "worker":
            return None
        counts = [0] * picker.count
        for index in picker.assignments().values():
            counts[index] += 1
        return counts
