"""The backward path: outputs that come through the tokenizer router, back to the workers.

With ``--outputs-via router`` the detokenizers (or an engine) send their batches to the
router's ``outputs`` socket. A batch is split by owning worker, one message each carrying
that worker's rows (frames regrouped, never decoded); a freeze-GC goes to every
registered worker; an idle batch is only counted. Rows for an address no registered
worker has are dropped and counted. Delivered outputs are counted by the receiving worker
(route ``backward``, the same in both output modes); the router records split sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from router_core.counters import Counters
from router_core.registry import WorkerRegistry
from router_core.tokenizer_router.dispatch import Raw
from router_core.tokenizer_router.effects import Effect, Instant, Send
from router_core.traffic import BACKWARD, BROADCAST, TrafficStats
from router_core.wire import BATCH_KINDS, Header, Kind, group_by_destination
from router_core.wire.kinds import kind_label
from router_core.wire.regroup import regroup

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["SPLIT_SPAN", "BackwardPath"]

#: The span of splitting one batch of outputs to its workers (the shell opens it).
SPLIT_SPAN: Final = "tokenizer-router split_outputs"


class BackwardPath:
    """Handlers of the router's ``outputs`` socket."""

    def __init__(self, registry: WorkerRegistry, counters: Counters, traffic: TrafficStats) -> None:
        self._registry = registry
        self._counters = counters
        self._traffic = traffic

    def entries(self) -> dict[Kind, Raw]:
        """The ``outputs`` socket's table: every batch kind, freeze-GC and idle."""
        table = {kind: Raw(self.on_batch) for kind in BATCH_KINDS}
        table[Kind.FREEZE_GC] = Raw(self.on_freeze_gc)
        table[Kind.IDLE] = Raw(self.on_idle)
        return table

    def on_batch(self, header: Header, frames: Sequence[FrameLike], at: Instant) -> list[Effect]:
        """A batch: one message per owning worker, carrying that worker's rows."""
        self._traffic.split_rows.observe(BACKWARD, len(header.rids))
        label = kind_label(header.kind)
        effects: list[Effect] = []
        for address, rows in group_by_destination(header.reply_to).items():
            if self._registry.by_address(address) is None:
                self._counters.add("dropped", "unknown_worker", len(rows))
            else:
                message = regroup(header, frames, rows)
                effects.append(Send(address, message, counter=("routed_rows", label, len(rows))))
        return effects

    def on_freeze_gc(
        self, header: Header, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``FREEZE_GC``: forwarded, untouched, to every registered worker."""
        return [
            Send(record.address, frames, traffic=(BROADCAST, record.worker_id))
            for record in self._registry.workers()
        ]

    def on_idle(self, header: Header, frames: Sequence[FrameLike], at: Instant) -> list[Effect]:
        """``IDLE``: nothing to deliver; counted."""
        self._counters.add("idle_batches", "outputs")
        return []
