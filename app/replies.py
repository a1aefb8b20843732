"""What the admin API answers for a router command's reply, and how its audit line
tells it: one entry per reply *type*, so a new command whose reply is an operation, a
worker or any other known shape needs nothing here.

:func:`answer_of` turns a reply into the API's model where the API has one (the
``pydantic`` models of :mod:`app.models`, via :mod:`app.views`) and into plain JSON data
otherwise; :func:`summary_of` is the reply's account for the audit record
(``op=... acked=...``, ``state=draining``). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from pydantic import BaseModel

from app.models import AbortResult, FreezeGcResult, Operation, Worker
from app.views import abort_of, freeze_gc_of, operation_of, worker_of
from router_core.control.replies import AbortReply, FreezeGcReply, OperationOutcome, WorkerView

__all__ = ["ReplyView", "answer_of", "names", "response_model_of", "summary_of"]


def names(listed: list[str]) -> str:
    """Names for an audit line: comma-separated, ``-`` for none."""
    return ",".join(listed) or "-"


def _operation_summary(outcome: OperationOutcome) -> str:
    if outcome.complete:
        return f"op={outcome.op_id} acked={names(outcome.acked)}"
    return f"op={outcome.op_id} stragglers={names(outcome.stragglers)}"


@dataclass(frozen=True)
class ReplyView:
    """How the API shows one reply type: its model, the conversion, the audit account."""

    model: type[BaseModel]
    view: Callable[[Any], BaseModel]
    summary: Callable[[Any], str]


_VIEWS: Final[Mapping[type, ReplyView]] = {
    OperationOutcome: ReplyView(Operation, operation_of, _operation_summary),
    WorkerView: ReplyView(Worker, worker_of, lambda view: f"state={view.state}"),
    AbortReply: ReplyView(AbortResult, abort_of, lambda reply: f"sent_for={names(reply.sent_for)}"),
    FreezeGcReply: ReplyView(FreezeGcResult, freeze_gc_of, lambda r: f"frozen={names(r.frozen)}"),
}


def response_model_of(reply_type: Any) -> type[BaseModel] | None:
    """The API's model for ``reply_type``, or None (the reply's own fields, as JSON)."""
    view = _VIEWS.get(reply_type)
    return None if view is None else view.model


def answer_of(reply: Any) -> Any:
    """``reply`` as the API answers it: its model, or its fields as JSON data."""
    view = _VIEWS.get(type(reply))
    return msgspec.to_builtins(reply) if view is None else view.view(reply)


def _scalar(value: Any) -> str:
    if isinstance(value, list):
        return names([str(each) for each in value])
    return str(value)


def summary_of(reply: Any) -> str:
    """The audit account of ``reply``: its type's, or its fields as ``name=value``."""
    view = _VIEWS.get(type(reply))
    if view is not None:
        return view.summary(reply)
    if isinstance(reply, msgspec.Struct):
        fields = msgspec.structs.asdict(reply)
        return " ".join(f"{name}={_scalar(value)}" for name, value in fields.items())
    return ""
