"""The queue limits every Switchboard socket and destination shares, written once.

Plain constants (no zmq), so a settings module can default to them and stay pure.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_BACKLOG", "DEFAULT_HWM"]

#: High-water mark for every socket Switchboard creates: finite, so memory is bounded.
DEFAULT_HWM: Final = 10_000
#: Messages queued per destination beyond the HWM before dropping: finite for the same reason.
DEFAULT_BACKLOG: Final = 1000
