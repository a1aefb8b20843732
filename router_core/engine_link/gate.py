"""What of its input an engine should act on: pure logic, no sockets.

Two things reach an engine more than once after a fault, and the engine behind the link
must not act on them twice:

* **Pause and continue operations** are applied in their order ``(router incarnation,
  sequence)`` (:func:`~router_core.wire.control.op_order`). A restarted router sends the
  engine its restored state again, and a message of the old router may still be queued:
  an operation no newer than the last one applied is acknowledged by the link and never
  shown to the engine (an id without that order is always shown).
* **Requests** a worker re-sends because the router they went through died: a
  ``GENERATE`` or ``EMBED`` for a ``(worker, rid)`` the engine has open (taken, no
  finishing row sent yet) is a duplicate and is dropped. A request id reused after its
  request finished is a new request.

The open set is bounded (:data:`MAX_OPEN_REQUESTS`; the oldest is forgotten beyond it,
which only weakens duplicate detection for an engine that never finishes requests).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final, Literal

from router_core.engine_link.inputs import Command, EngineInput
from router_core.wire import Kind
from router_core.wire.control import ContinueRequest, OpOrder, PauseRequest, op_order

__all__ = ["MAX_OPEN_REQUESTS", "InputGate"]

#: Requests remembered as open at most.
MAX_OPEN_REQUESTS: Final = 262_144


class InputGate:
    """The link's memory of applied operations and open requests."""

    def __init__(self, max_open: int = MAX_OPEN_REQUESTS) -> None:
        if max_open <= 0:
            raise ValueError("max_open must be positive")
        self.max_open = max_open
        #: The order of the newest operation shown to the engine (None: none yet).
        self.last_op: OpOrder | None = None
        self._open: OrderedDict[tuple[str, str], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def screen(self, item: EngineInput) -> Literal["operation", "request"] | None:
        """None when the engine should act on ``item``; else what it duplicates (an
        operation no newer than the last applied, or a request still open)."""
        payload = item.payload
        if isinstance(payload, PauseRequest | ContinueRequest):
            return None if self.admit_operation(payload.op_id) else "operation"
        if isinstance(item, Command) or item.kind not in (Kind.GENERATE, Kind.EMBED):
            return None
        return None if self.admit_request(item.reply_to, item.rid) else "request"

    def admit_operation(self, op_id: str) -> bool:
        """Whether the engine should apply operation ``op_id`` (newer than the last)."""
        order = op_order(op_id)
        if order is None:
            return True
        if self.last_op is not None and order <= self.last_op:
            return False
        self.last_op = order
        return True

    def admit_request(self, owner: str, rid: str) -> bool:
        """Whether a new request ``rid`` of ``owner`` is not already open here."""
        key = (owner, rid)
        if key in self._open:
            return False
        self._open[key] = None
        if len(self._open) > self.max_open:
            self._open.popitem(last=False)
        return True

    def finished(
        self,
        rids: Sequence[str],
        owners: Sequence[str] | None,
        reasons: Sequence[dict[str, Any] | None] | None,
    ) -> None:
        """Forget the requests whose rows in a sent batch finish them."""
        # Most steps finish nothing: a C-level count skips the per-row walk then.
        if not reasons or not owners or reasons.count(None) == len(reasons):
            return
        opened = self._open
        for rid, owner, reason in zip(rids, owners, reasons, strict=False):
            if reason is not None:
                opened.pop((owner, rid), None)
