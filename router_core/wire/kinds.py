"""Message kinds: the first element of every header.

The numeric codes are part of the wire contract (see ``docs/protocol.md``). Every code is
below 128 so it encodes as a MessagePack positive fixint.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["BATCH_KINDS", "DATA_KINDS", "KIND_LABELS", "Kind", "kind_label"]


class Kind(IntEnum):
    """What a message is; decides its route and how many payload frames follow."""

    # Requests, worker -> router -> engine (one payload frame).
    GENERATE = 1
    EMBED = 2
    ABORT = 3

    # Registry traffic, worker <-> router (one payload frame).
    REGISTER = 10
    REGISTER_REPLY = 11
    HEARTBEAT = 12
    DEREGISTER = 13
    DRAIN = 14
    #: A process on the output path says which incarnation it is: detokenizer router or
    #: detokenizer -> tokenizer router (workers socket), and router -> every worker.
    UPSTREAM = 15

    # Pause/continue barrier.
    PAUSE = 20  # router -> engine
    CONTINUE = 21  # router -> engine
    PAUSE_BROADCAST = 22  # router -> worker (carries both pause and continue)
    ACK = 23  # worker or engine -> router
    #: Engine -> router: how an operator's engine command ended (:class:`CommandReply`).
    COMMAND_REPLY = 24

    # Engine housekeeping.
    FREEZE_GC = 30
    LOAD = 31
    #: Router -> engine: an operator's command for the engine, by name
    #: (``flush_cache``, ...); answered with ``COMMAND_REPLY``.
    ENGINE_COMMAND = 32

    # Outputs, engine -> detokenizers -> workers (one row frame per request).
    TOKEN_BATCH = 40
    STR_BATCH = 41
    EMBEDDING_BATCH = 42
    IDLE = 43  # the idle (empty) batch: no payload frame


#: Kinds a tokenizer router forwards to the engine without reading the payload.
DATA_KINDS: frozenset[Kind] = frozenset({Kind.GENERATE, Kind.EMBED, Kind.ABORT})

#: Kinds framed one row per request, ``header.rids[i]`` owning payload frame ``i``.
BATCH_KINDS: frozenset[Kind] = frozenset({Kind.TOKEN_BATCH, Kind.STR_BATCH, Kind.EMBEDDING_BATCH})


#: Each kind's code -> its metric label: its name in lower case (``generate``, ``str_batch``).
KIND_LABELS: dict[int, str] = {kind.value: kind.name.lower() for kind in Kind}


def kind_label(kind: Kind) -> str:
    """The metric label of ``kind`` (:data:`KIND_LABELS`)."""
    return KIND_LABELS[kind.value]
