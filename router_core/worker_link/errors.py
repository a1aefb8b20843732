"""Why a worker link refuses or fails a request: the exceptions a front end handles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router_core.wire.finish import LOST_STATUS, FinishReason

__all__ = ["AdmissionRefused", "RequestLost", "RouterUnavailable"]


class AdmissionRefused(Exception):
    """A request cannot be admitted; ``reason`` is ``draining``, ``stopping``,
    ``not_registered`` (the router did not accept the worker within the wait) or
    ``paused_too_long`` (the stack stayed paused past the worker's ``pause_wait_s``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RouterUnavailable(Exception):
    """The router did not take a request within ``send_timeout_s`` (it is down or full)."""


class RequestLost(Exception):
    """A request was lost to a fault (its stream ended with a ``lost`` abort): answer
    with an error of ``status``, never with its partial text as a success.

    ``cause`` is the abort's ``err_type`` (``engine_restarted``, ``rows_lost``,
    ``detokenizer_state_lost``, ``idle_timeout``, ...); the message names what failed.
    """

    def __init__(self, cause: str, message: str, status: int = LOST_STATUS) -> None:
        super().__init__(message)
        self.cause = cause
        self.status = status

    @classmethod
    def from_reason(cls, reason: Mapping[str, Any]) -> RequestLost | None:
        """The error a finish reason stands for, or None if it is not a lost abort."""
        view = FinishReason.of(reason)
        if not view.lost:
            return None
        return cls(
            view.err_type or "lost",
            view.message or "the request was lost",
            view.status_code or LOST_STATUS,
        )
