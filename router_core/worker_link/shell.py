"""The worker link's inbound shell: what stands between the inbox and the pure core.

:class:`InboundShell` takes each message the inbox validated, stamps it with the time
(an :class:`~router_core.worker_link.effects.Instant`, read before any row is delivered:
the hop ends at receipt), hands it to
:class:`~router_core.worker_link.dispatch.InboundDispatch` (inside one
``worker receive_outputs`` span when its rows are traced) and carries out the effects
the core returns, in order, through one table: sends through the link's one send path,
wake-ups of admission and the heartbeat timer, the outputs observer, ``gc.freeze()``.
No sockets here either: sends go through the callable it is given.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from router_core import tracing
from router_core.counters import Counters
from router_core.wire import Header
from router_core.worker_link.dispatch import RECEIVE_SPAN, InboundDispatch, OutputsObserver
from router_core.worker_link.effects import (
    Effect,
    FreezeGarbageCollector,
    Instant,
    OutputsReceived,
    Send,
    SessionChanged,
)

if TYPE_CHECKING:
    from router_core.transport import FrameLike

__all__ = ["InboundShell"]

logger = logging.getLogger(__name__)


class InboundShell:
    """Runs ``dispatch`` on each inbound message and applies its effects.

    ``send`` carries out one :class:`~router_core.worker_link.effects.Send` (the link's
    sockets); ``on_change`` runs on ``SessionChanged`` (admission may have opened, the
    reported state may differ); ``on_outputs`` observes each output message after its
    rows are delivered (see :data:`~router_core.worker_link.dispatch.OutputsObserver`):
    an observer that raises is logged and counted (``observer_errors``), never raised.
    """

    def __init__(
        self,
        dispatch: InboundDispatch,
        counters: Counters,
        *,
        send: Callable[[Send], object],
        on_change: Callable[[], None],
        on_outputs: OutputsObserver | None = None,
    ) -> None:
        self.dispatch = dispatch
        self._counters = counters
        self._send = send
        self._on_change = on_change
        self._on_outputs = on_outputs
        self._appliers: Mapping[type[Any], Callable[[Any], object]] = {
            Send: send,
            SessionChanged: self._session_changed,
            OutputsReceived: self._outputs_received,
            FreezeGarbageCollector: self._freeze_gc,
        }

    def on_message(self, header: Header, frames: list[FrameLike]) -> None:
        """One validated message: to the core with the time, then its effects (after the
        receive span, as the observer is no part of receiving)."""
        at = Instant(time.monotonic(), time.time())
        with tracing.batch_span_if_traced(RECEIVE_SPAN, header.row_traces):
            effects = self.dispatch.on_message(header, frames, at)
        self.apply(effects)

    def apply(self, effects: Sequence[Effect]) -> None:
        """Carry out ``effects`` in order."""
        appliers = self._appliers
        for effect in effects:
            appliers[type(effect)](effect)

    def _session_changed(self, _: SessionChanged) -> None:
        self._on_change()

    def _outputs_received(self, received: OutputsReceived) -> None:
        observe = self._on_outputs
        if observe is None:
            return
        try:
            observe(received.latency_s, received.rows, received.nbytes)
        except Exception:  # an observer's bug must not cost the rows that follow
            logger.exception("worker link: the outputs observer failed")
            self._counters.add("observer_errors", "on_outputs")

    def _freeze_gc(self, _: FreezeGarbageCollector) -> None:
        gc.freeze()
