"""The output path's incarnations, as the tokenizer router hears them, for the workers.

The detokenizer router and each detokenizer send their :class:`UpstreamIncarnation`
about once a second to the router's workers socket. :class:`UpstreamIncarnations` keeps
the latest of each (at most :data:`MAX_UPSTREAM_PROCESSES`) and, when one is new or
grew (the process restarted), tells every registered worker; a worker that registers is
told all of them. Workers use them to end requests whose rows died with a process
(``router_core.worker_link``). A router with a stack key refuses a beacon that does not
carry it (``rejected{bad_upstream_key}``): a forged one of a new incarnation would make
every worker suspect its streams. Beacons go on to the workers without the key. Pure:
time comes in as an :class:`Instant`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from router_core.beacon import MAX_UPSTREAM_PROCESSES
from router_core.counters import Counters
from router_core.identifiers import valid_process_name
from router_core.registry import WorkerRecord, WorkerRegistry
from router_core.tokenizer_router.effects import Effect, Instant, Send
from router_core.tokenizer_router.peers import PeerCheck
from router_core.traffic import BROADCAST
from router_core.wire import Kind, frame_message
from router_core.wire.control import UpstreamIncarnation

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["MAX_UPSTREAM_PROCESSES", "UpstreamIncarnations"]


class UpstreamIncarnations:
    """The latest incarnation of each output-path process, and the news to the workers."""

    def __init__(self, registry: WorkerRegistry, counters: Counters, peers: PeerCheck) -> None:
        self._registry = registry
        self._counters = counters
        self._peers = peers
        self._latest: dict[str, int] = {}

    def latest(self) -> dict[str, int]:
        """Process -> its newest incarnation."""
        return dict(self._latest)

    def on_upstream(
        self, news: UpstreamIncarnation, frames: Sequence[FrameLike], at: Instant
    ) -> list[Effect]:
        """``UPSTREAM`` from a process: a new or grown incarnation goes to every worker
        (refused without the stack key, or with a bad name or incarnation)."""
        name = news.process
        if not self._peers.has_key(news.key):
            return self._peers.refuse("bad_upstream_key", name, at)
        if not valid_process_name(name) or news.incarnation <= 0:
            self._counters.add("rejected", "bad_upstream")
            return []
        known = self._latest.get(name)
        if known is not None and news.incarnation <= known:
            return []  # the usual once-a-second repeat (or an older one, late)
        if known is None and len(self._latest) >= MAX_UPSTREAM_PROCESSES:
            self._counters.add("rejected", "upstream_full")
            return []
        self._latest[name] = news.incarnation
        self._counters.add("upstream_incarnations", "restarted" if known else "first")
        message = frame_message(Kind.UPSTREAM, UpstreamIncarnation(name, news.incarnation))
        return [
            Send(record.address, message, traffic=(BROADCAST, record.worker_id))
            for record in self._registry.workers()
        ]

    def tell(self, record: WorkerRecord) -> list[Effect]:
        """Every incarnation known, for a worker that just registered."""
        return [
            Send(
                record.address,
                frame_message(Kind.UPSTREAM, UpstreamIncarnation(name, incarnation)),
                traffic=(BROADCAST, record.worker_id),
            )
            for name, incarnation in sorted(self._latest.items())
        ]
