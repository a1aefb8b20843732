"""The limits every Switchboard socket, destination and client shares, written once.

Plain constants (no zmq), so a settings module can default to them and stay pure.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_BACKLOG",
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_HWM",
    "MAX_BARRIER_TIMEOUT_S",
    "MAX_FRAME_BYTES",
    "MAX_RID_CHARS",
    "ZMTP_HEARTBEAT_IVL_MS",
    "ZMTP_HEARTBEAT_TIMEOUT_MS",
]

#: High-water mark for every socket Switchboard creates: finite, so memory is bounded.
DEFAULT_HWM: Final = 10_000
#: Messages queued per destination beyond the HWM before dropping: finite for the same reason.
DEFAULT_BACKLOG: Final = 1000
#: The largest frame a bound socket takes from a peer: libzmq drops the connection of a
#: peer that sends a bigger one before allocating it, so no frame can exhaust memory. The
#: largest real frame is a request's payload, bounded by the worker's 16 MiB body limit
#: (its text plus its token ids), well within this.
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
#: The longest a pause or continue may wait for its acknowledgements (``timeout_s``), in
#: seconds: the router's control socket, the admin API and the operator commands all
#: accept ``0 < timeout_s <= MAX_BARRIER_TIMEOUT_S``.
MAX_BARRIER_TIMEOUT_S: Final = 600.0
#: Seconds a barrier waits for its acknowledgements when its caller names no timeout.
DEFAULT_BARRIER_TIMEOUT_S: Final = 5.0
#: The longest request id (``rid``) a worker accepts from a client, and so the longest an
#: operator's abort may name.
MAX_RID_CHARS: Final = 256
#: ZMTP heartbeats on connections between hosts, so a connection whose network went
#: away is dropped within seconds, not after TCP's own minutes. Only the remote worker
#: pings; its pings carry the timeout as their TTL, after which the gateway drops the
#: connection too. (libzmq 4.3 aborts when a heartbeat timer fires on a connection whose
#: input is stopped by a full receive queue, libzmq issue 4364: so the side that pings
#: never lets its receive queue fill, and the gateway, which may stop reading, never pings.)
ZMTP_HEARTBEAT_IVL_MS: Final = 1000
ZMTP_HEARTBEAT_TIMEOUT_MS: Final = 3000
