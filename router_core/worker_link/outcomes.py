"""What a worker link counts when a message cannot leave now (pure data, no sockets).

Every send goes through :meth:`router_core.worker_link.sockets.LinkSockets.send`, which
counts a :data:`Count` for the outcome; these are the ones for a message the router
could not take (its queue full, or not connected).
"""

from __future__ import annotations

from typing import Final

__all__ = ["ABORT_DROPPED", "CONTROL_DROPPED", "REGISTRATION_UNSENT", "Count"]

#: A counter name and label, as ``Counters.add`` takes them.
Count = tuple[str, str]

#: An abort (best effort) that could not leave.
ABORT_DROPPED: Final[Count] = ("dropped", "abort")

#: A control message that could not leave (heartbeat, acknowledgement, deregistration).
CONTROL_DROPPED: Final[Count] = ("dropped", "control")

#: A registration that could not leave; counted apart, as it goes out again.
REGISTRATION_UNSENT: Final[Count] = ("registration_retries", "router_not_connected")
