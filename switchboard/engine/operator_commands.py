"""What the built-in engine does for each operator command sent as ``ENGINE_COMMAND``.

One handler per command name (:data:`HANDLERS`): it takes the scheduler and the
command's arguments (their struct, typed by the engine link) and returns the command's
reply struct, or raises :class:`Refusal` with the code and the sentence the operator
reads. :func:`carry_out` answers every command exactly once, a name the engine does not
know or arguments that do not fit included (``docs/protocol.md`` 3.11).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from router_core.control.command_args import FlushCacheArgs, UpdateWeightsArgs
from router_core.control.replies import FlushCacheReply, WeightsLoaded
from router_core.engine_link import Command, EngineLink
from router_core.wire.engine_commands import REPLY_CODES, EngineCommand, ReplyCode
from switchboard.engine.queueing import QueueingScheduler

__all__ = ["HANDLERS", "Refusal", "carry_out", "flush_cache", "update_weights"]

#: Request ids a refusal names before it counts the rest.
NAMED_RIDS: Final = 8


class Refusal(Exception):
    """The engine does not carry the command out: ``code`` and a sentence why."""

    def __init__(self, code: ReplyCode, message: str) -> None:
        super().__init__(message)
        self.code: ReplyCode = code
        self.message = message


def _rids(scheduler: QueueingScheduler) -> str:
    rids = [sequence.rid for sequence in scheduler.running_sequences()]
    named = ", ".join(rids[:NAMED_RIDS])
    return named if len(rids) <= NAMED_RIDS else f"{named} and {len(rids) - NAMED_RIDS} more"


def flush_cache(scheduler: QueueingScheduler, args: FlushCacheArgs) -> FlushCacheReply:
    """Drop the backend's cache; refused (``conflict``) while any request runs and
    generation is not paused, naming the running requests."""
    running = scheduler.running_sequences()
    if running and scheduler.paused is None:
        raise Refusal(
            "conflict",
            f"{len(running)} requests are running ({_rids(scheduler)}); pause generation "
            "or let them finish first",
        )
    try:
        dropped = scheduler.flush_cache()
    except RuntimeError as exc:  # the backend's own refusal (a cache still in use)
        raise Refusal("conflict", str(exc)) from exc
    return FlushCacheReply(flushed=True, dropped_tokens=dropped)


def update_weights(scheduler: QueueingScheduler, args: UpdateWeightsArgs) -> WeightsLoaded:
    """Load ``args.model`` as ``args.version`` (the router paused generation first);
    refused while requests run unpaused (``conflict``), and ``bad_arguments`` naming the
    file and the reason for weights that cannot be loaded (the old ones serve on)."""
    running = scheduler.running_sequences()
    if running and scheduler.paused is None:
        raise Refusal(
            "conflict", f"{len(running)} requests are running ({_rids(scheduler)}); pause first"
        )
    try:
        version = scheduler.load_weights(args.model, args.version)
    except ValueError as exc:
        raise Refusal("bad_arguments", str(exc)) from exc
    return WeightsLoaded(version=version, model=args.model)


#: The engine's handler of each command it carries out, by command name.
HANDLERS: Final[dict[str, Callable[[QueueingScheduler, Any], msgspec.Struct]]] = {
    "flush_cache": flush_cache,
    "update_weights": update_weights,
}


def carry_out(link: EngineLink, scheduler: QueueingScheduler, command: Command) -> None:
    """Run one engine command and answer it on ``link``, whatever happens."""
    payload = command.payload
    assert isinstance(payload, EngineCommand)
    handler = HANDLERS.get(payload.command)
    if command.args is None or handler is None:
        code, _, reason = (command.problem or "unknown_command: ").partition(": ")
        known: ReplyCode = code if code in REPLY_CODES else "unknown_command"  # type: ignore[assignment]
        message = reason or f"this engine does not carry out {payload.command!r}"
        link.answer_command(payload.op_id, code=known, message=message)
        return
    try:
        result = handler(scheduler, command.args)
    except Refusal as refusal:
        link.answer_command(payload.op_id, code=refusal.code, message=refusal.message)
        return
    link.answer_command(payload.op_id, result)
