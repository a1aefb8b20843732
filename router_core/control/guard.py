"""Who may use a control socket, and the audit lines it writes: pure, no sockets.

A :class:`ControlGuard` holds the stack key a request must carry (None: a server
started without one, which runs every request) and the :class:`~router_core.audit.AuditLog`
its lines go to. The server writes one audit line for each run of a mutating command
(its result) and for each refused request (wrong or missing key, unknown command, bad
arguments), with the fields of :func:`audit_fields`, in the admin app's format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from router_core.audit import AuditLog, AuditValue
from router_core.control.protocol import ControlRequest
from router_core.control.replies import FreezeGcReply, OperationOutcome, WorkerView
from router_core.control.table import AuditedCall
from router_core.credentials import matches

__all__ = [
    "MAX_ACTOR_CHARS",
    "MAX_ARGS_CHARS",
    "OPEN_CONTROL",
    "ControlGuard",
    "args_text",
    "audit_fields",
    "call_of",
    "outcome_of",
]

#: Longest arguments text in an audit line; the rest is cut (the line says so).
MAX_ARGS_CHARS: Final = 256
#: Longest actor kept from a request (the caller's own claim).
MAX_ACTOR_CHARS: Final = 128
#: What a router without a key logs once at start (``%s``: its control endpoint).
OPEN_CONTROL: Final = (
    "control socket %s runs every command without a stack key: any local process that "
    "can reach it can pause, drain or read the stack; give --run-dir (stack.key in it) "
    "or --key-file to require the key"
)


@dataclass(frozen=True)
class ControlGuard:
    """The key a control request must carry and where audit lines go.

    ``key`` None admits every request (a process started without a run directory or a
    key file); ``key_file`` is where a client reads the key, named in a refusal.
    ``role`` (``tokenizer_router``, ...) is written in each audit line, so lines from
    several processes can share one file.
    """

    key: str | None = None
    key_file: str = ""
    audit: AuditLog | None = None
    role: str = ""

    def admits(self, request: ControlRequest) -> bool:
        """Whether ``request`` carries the key (always, without one); constant time."""
        return self.key is None or matches(request.key, self.key)

    def refusal(self) -> str:
        """The UNAUTHORIZED message: what to send and where to find it."""
        where = self.key_file or "the stack's key file"
        return f"this control socket needs the stack key: send the key in {where}"

    def close(self) -> None:
        """Close the audit log's file, if any (later lines go to its logger only)."""
        if self.audit is not None:
            self.audit.close()

    def record(self, call: AuditedCall, result: str, *, reason: str = "", detail: str = "") -> None:
        """One audit line for ``call`` (nothing without an audit log)."""
        if self.audit is not None:
            self.audit.record(**audit_fields(call, result, self.role, reason=reason, detail=detail))


def audit_fields(
    call: AuditedCall, result: str, role: str, *, reason: str = "", detail: str = ""
) -> dict[str, AuditValue]:
    """The audit line's fields: ``who`` (the claimed actor, ``-`` for none), ``via``
    (``control``), ``at`` (the role), ``action`` (the command), ``args``, ``result``
    (``ok``, ``timeout``, ``started``, ``refused`` or ``error``), ``reason`` (the error
    code's name, lower case) and ``detail``."""
    return {
        "who": call.actor or None,
        "via": "control",
        "at": role or None,
        "action": call.command,
        "args": call.args or None,
        "result": result,
        "reason": reason or None,
        "detail": detail or None,
    }


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        return repr(value)


def args_text(args: Mapping[str, Any] | msgspec.Struct) -> str:
    """``k=v k=v`` for a command's arguments (parsed or as sent), cut at
    :data:`MAX_ARGS_CHARS`; strings bare, anything else as JSON."""
    fields = msgspec.to_builtins(args) if isinstance(args, msgspec.Struct) else dict(args)
    text = " ".join(f"{key}={_value_text(value)}" for key, value in fields.items())
    if len(text) > MAX_ARGS_CHARS:
        return f"{text[:MAX_ARGS_CHARS]}...(+{len(text) - MAX_ARGS_CHARS} chars)"
    return text


def call_of(request: ControlRequest, args: Mapping[str, Any] | msgspec.Struct) -> AuditedCall:
    """The audited call ``request`` makes, with ``args`` (parsed, or as sent)."""
    return AuditedCall(request.actor[:MAX_ACTOR_CHARS], request.command, args_text(args))


def _barrier(outcome: OperationOutcome) -> tuple[str, str]:
    detail = f"op {outcome.op_id} acked={','.join(outcome.acked) or '-'}"
    if outcome.complete:
        return "ok", detail
    return "timeout", f"{detail} stragglers={','.join(outcome.stragglers) or '-'}"


def _worker(view: WorkerView) -> tuple[str, str]:
    return "ok", f"{view.worker_id} is {view.state}"


def _frozen(reply: FreezeGcReply) -> tuple[str, str]:
    return "ok", f"frozen={','.join(reply.frozen)} forwarded_to={','.join(reply.forwarded_to)}"


#: How a mutation's result reads in its audit line, by the result's type.
_OUTCOMES: Final[Mapping[type[Any], Callable[[Any], tuple[str, str]]]] = {
    OperationOutcome: _barrier,
    WorkerView: _worker,
    FreezeGcReply: _frozen,
}


def outcome_of(result: Any) -> tuple[str, str]:
    """A mutation's ``(result, detail)`` for its audit line: a barrier that timed out is
    ``timeout`` naming the stragglers; anything else is ``ok``."""
    describe = _OUTCOMES.get(type(result))
    return ("ok", "") if describe is None else describe(result)
