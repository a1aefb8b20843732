"""What an engine receives: typed requests and commands, read from validated messages.

Pure: no sockets. :func:`read_input` turns one well-framed message (header decoded, frame
count checked by :func:`router_core.inbound.accept`) into a :class:`Request` or a
:class:`Command`, or raises :class:`~router_core.wire.WireError` with the reason to count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
import zmq

from router_core.control.commands import TOKENIZER_ROUTER_COMMANDS
from router_core.transport import FrameLike
from router_core.wire import DATA_KINDS, Header, Kind, WireError, decode_payload
from router_core.wire.control import ContinueRequest, FreezeGC, PauseRequest
from router_core.wire.engine_commands import EngineCommand
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest

__all__ = ["COMMAND_KINDS", "ENGINE_COMMANDS", "Command", "EngineInput", "Request", "read_input"]

_STEPS: Final = [c.engine for c in TOKENIZER_ROUTER_COMMANDS.values() if c.engine is not None]
#: Commands the router sends the engine besides requests: the command objects' kinds.
COMMAND_KINDS: Final = frozenset(step.kind for step in _STEPS) - DATA_KINDS
#: The argument struct of each command sent as ``ENGINE_COMMAND``, by command name.
ENGINE_COMMANDS: Final[dict[str, type[msgspec.Struct]]] = {
    name: command.engine.payload
    for name, command in TOKENIZER_ROUTER_COMMANDS.items()
    if command.engine is not None and command.engine.kind == Kind.ENGINE_COMMAND
}


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """A request for the engine, with what it needs to answer it.

    ``kind`` is ``GENERATE``, ``EMBED`` or ``ABORT``. ``reply_to`` is the owning worker's
    return address: put it in the ``http_worker_ipcs`` column of every output row for
    ``rid``. An ``ABORT`` with ``abort_all`` aborts every request owned by ``reply_to``
    (its ``rid`` is then usually ``""``). Pass ``traceparent``/``tracestate`` on to the outputs.
    """

    kind: Kind
    payload: GenerateRequest | EmbeddingRequest | AbortRequest
    rid: str
    reply_to: str
    traceparent: str = ""
    tracestate: str = ""
    sent_ns: int = 0


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A command from the router: ``PAUSE``, ``CONTINUE``, ``FREEZE_GC`` or an
    ``ENGINE_COMMAND`` (an operator's command, by name: ``payload.command``).

    Apply a pause or continue, then acknowledge its ``op_id``; on freeze-GC, freeze and
    forward it to the detokenizers; carry an engine command out and answer it
    (:meth:`EngineLink.answer_command`). ``args`` is an engine command's arguments as
    its struct (:data:`ENGINE_COMMANDS`), or None for a name this link does not know or
    arguments that do not fit it (``problem`` says which: answer ``unknown_command`` or
    ``bad_arguments``).
    """

    kind: Kind
    payload: PauseRequest | ContinueRequest | FreezeGC | EngineCommand
    args: msgspec.Struct | None = None
    problem: str = ""


#: What an engine receives, in arrival order.
EngineInput = Request | Command


def read_input(header: Header, frames: Sequence[FrameLike]) -> EngineInput:
    """The request or command a well-framed message carries.

    Raises ``WireError`` with reason ``unexpected_kind`` (not a kind the engine gets),
    ``bad_payload`` (the payload does not decode) or ``rid_mismatch`` (the payload's
    ``rid`` is not the header's; the router never looks at payloads, so this is the
    first place it can be caught).
    """
    kind = header.kind
    if kind not in DATA_KINDS and kind not in COMMAND_KINDS:
        raise WireError("unexpected_kind", f"{kind.name} is not for the engine")
    frame = frames[1]
    payload: Any = decode_payload(kind, frame.buffer if isinstance(frame, zmq.Frame) else frame)
    if isinstance(payload, EngineCommand):
        return _engine_command(kind, payload)
    if kind in COMMAND_KINDS:
        return Command(kind=kind, payload=payload)
    if header.rids and payload.rid != header.rids[0]:
        raise WireError("rid_mismatch", f"payload {payload.rid!r}, header {header.rids[0]!r}")
    return Request(
        kind=kind,
        payload=payload,
        rid=payload.rid,
        reply_to=header.reply_to[0],
        traceparent=header.traceparent,
        tracestate=header.tracestate,
        sent_ns=header.sent_ns,
    )


def _engine_command(kind: Kind, payload: EngineCommand) -> Command:
    """An engine command with its arguments typed, or the reason they cannot be."""
    args_type = ENGINE_COMMANDS.get(payload.command)
    if args_type is None:
        known = ", ".join(sorted(ENGINE_COMMANDS))
        problem = f"unknown_command: {payload.command!r} (known: {known})"
        return Command(kind=kind, payload=payload, problem=problem)
    try:
        args = msgspec.convert(payload.args, args_type)
    except msgspec.ValidationError as exc:
        return Command(kind=kind, payload=payload, problem=f"bad_arguments: {exc}")
    return Command(kind=kind, payload=payload, args=args)
