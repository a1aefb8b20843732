"""What an engine tells the router on its events socket, framed: pure, no sockets.

Each function returns the frames of one message that carries the stack key ``key`` in
its ``secret``: an acknowledgement of a pause or continue, the answer to an operator's
engine command, a load snapshot (stamped with when it was taken and when this engine
incarnation started, where the engine left them 0).
"""

from __future__ import annotations

import msgspec

from router_core.wire import Frames, Kind, frame_message
from router_core.wire.control import ENGINE, Acknowledgement, LoadSnapshot
from router_core.wire.engine_commands import CommandReply, ReplyCode

__all__ = ["acknowledgement", "command_reply", "load_message"]


def acknowledgement(op_id: str, key: str) -> Frames:
    """``ACK``: pause/continue ``op_id`` has been applied by the engine."""
    return frame_message(Kind.ACK, Acknowledgement(op_id=op_id, participant=ENGINE, secret=key))


def command_reply(
    op_id: str, result: msgspec.Struct | None, code: ReplyCode | None, message: str, key: str
) -> Frames:
    """``COMMAND_REPLY``: done with ``result`` (None: no figures) when ``code`` is None,
    else refused with ``code`` and ``message``."""
    if code is None:
        fields = {} if result is None else msgspec.to_builtins(result)
        reply = CommandReply(op_id=op_id, ok=True, result=fields, secret=key)
    else:
        reply = CommandReply(op_id=op_id, ok=False, code=code, message=message, secret=key)
    return frame_message(Kind.COMMAND_REPLY, reply)


def load_message(snapshot: LoadSnapshot, key: str, *, opened_ns: int, now_ns: int) -> Frames:
    """``LOAD``: ``snapshot`` with ``taken_ns`` (``now_ns``) and ``engine_started_ns``
    (``opened_ns``) filled in where they are 0, and the key."""
    stamps: dict[str, object] = {"secret": key}
    if snapshot.taken_ns == 0:
        stamps["taken_ns"] = now_ns
    if snapshot.engine_started_ns == 0:
        stamps["engine_started_ns"] = opened_ns
    return frame_message(Kind.LOAD, msgspec.structs.replace(snapshot, **stamps))
