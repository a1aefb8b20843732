"""The gateway's own frames: what a remote worker and the worker gateway say to each other.

A worker on another host opens two CURVE connections to the control host's gateway and
nothing else (docs/protocol.md section 12):

* **control** — a DEALER, its routing id the worker id, to the gateway's ROUTER. Every
  message starts with one verb frame:

  ========== ========= ================================================================
  verb       direction frames after the verb
  ========== ========= ================================================================
  ``INFO``   up        none; any routing id may ask (a worker asks before it has an
                       address)
  ``PREFIX`` down      the return-address prefix: a worker's address is the prefix and
                       its worker id
  ``HELLO``  up        the worker's return address (prefix + worker id)
  ``WELCOME`` down     the same address: the gateway listens there for the worker now
  ``REFUSED`` down     a reason (``bad_id``, ``bad_address``, ``id_taken``, ``full``)
  ``WHO``    down      none: this gateway does not know the worker (it restarted, or
                       forgot an idle worker); the worker says ``HELLO`` again
  ``UP``     up        one protocol message for the router's ``workers`` endpoint
                       (registration, heartbeat, acknowledgement, deregistration)
  ``DOWN``   down      one protocol message the router or a detokenizer sent to the
                       worker's return address
  ========== ========= ================================================================

* **requests** — a PUSH to the gateway's PULL, carrying protocol messages for the
  router's ``requests`` endpoint unchanged (no verb), so back-pressure from the engine
  reaches the worker exactly as on one host.

Pure: frames in, frames out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from router_core.identifiers import valid_worker_id

__all__ = [
    "DOWN",
    "HELLO",
    "INFO",
    "PREFIX",
    "REFUSED",
    "UP",
    "WELCOME",
    "WHO",
    "address_for",
    "worker_id_of",
]

INFO: Final = b"INFO"
PREFIX: Final = b"PREFIX"
HELLO: Final = b"HELLO"
WELCOME: Final = b"WELCOME"
REFUSED: Final = b"REFUSED"
WHO: Final = b"WHO"
UP: Final = b"UP"
DOWN: Final = b"DOWN"


def address_for(prefix: str, worker_id: str) -> str:
    """The return address the gateway keeps for ``worker_id`` under ``prefix``."""
    return f"{prefix}{worker_id}"


def worker_id_of(routing_id: bytes | Sequence[int]) -> str | None:
    """The worker id a routing id spells, or None if it is no valid worker id."""
    try:
        text = bytes(routing_id).decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if valid_worker_id(text) else None
