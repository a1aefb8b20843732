"""Why a worker link refuses or fails a request: the two exceptions a front end handles."""

from __future__ import annotations

__all__ = ["AdmissionRefused", "RouterUnavailable"]


class AdmissionRefused(Exception):
    """A request cannot be admitted; ``reason`` is ``draining``, ``stopping`` or
    ``not_registered`` (the router did not accept the worker within the wait)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RouterUnavailable(Exception):
    """The router did not take a request within ``send_timeout_s`` (it is down or full)."""
