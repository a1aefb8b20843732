"""The limits an HTTP server puts on its clients, and how its refusals look.

:class:`HttpLimits` is plain data, shared by the worker's and the admin app's settings
(this module imports neither uvicorn nor starlette, so reading a default stays cheap);
:mod:`httpkit.protocol` enforces it on every connection, :mod:`httpkit.hosts` adds the
``Host`` check. :class:`Refusals` is how one app's refusals read (its error body) and
are counted.

* ``max_header_bytes``: the request line and headers of one request together; beyond
  it, 431 and the connection closes. No more than this (plus one network read) is ever
  held for a request head.
* ``header_timeout_s``: a request head must arrive whole within this many seconds of its
  first byte, however steadily it trickles; otherwise 408 and close.
* ``body_timeout_s``: a request body must arrive whole within this many seconds of the
  end of its head; otherwise 408 (or, once the app has started answering, a close).
* ``keep_alive_s``: a connection with no request in progress, a fresh one included, is
  closed after this many idle seconds.
* ``max_connections``: connections one process holds at once; the next one is answered
  503 (``Retry-After: 1``) and closed, the open ones are not touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Final

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_KEEP_ALIVE_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEADER_BYTES",
    "REFUSAL_STATUSES",
    "ErrorBody",
    "HttpLimits",
    "Refusals",
    "json_error",
]

#: 64 KiB: far above any real client's head (browsers send a few KiB; uvicorn's h11
#: backend allows 16 KiB), far below what could hurt a process.
DEFAULT_MAX_HEADER_BYTES: Final = 64 * 1024
DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
#: A 16 MiB body (the worker's largest) in 30 s is 0.5 MB/s; raise it for slow links.
DEFAULT_BODY_TIMEOUT_S: Final = 30.0
DEFAULT_KEEP_ALIVE_S: Final = 5.0
DEFAULT_MAX_CONNECTIONS: Final = 1024

#: A refusal's JSON body, given its status, a one-word reason and a sentence.
ErrorBody = Callable[[int, str, str], bytes]


def json_error(status: int, reason: str, message: str) -> bytes:
    """``{"error": {"code": reason, "message": message}}``: the admin app's error shape,
    and the default of servers that give none."""
    return json.dumps({"error": {"code": reason, "message": message}}).encode()


def _uncounted(reason: str) -> None:
    """Count nothing."""


@dataclass(frozen=True, kw_only=True)
class HttpLimits:
    """What one HTTP server process tolerates of its clients (see the module docstring)."""

    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name in ("max_header_bytes", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)}")

    @classmethod
    def of(cls, settings: object) -> HttpLimits:
        """The limits a process's ``settings`` set: its attributes of the same names."""
        return cls(**{limit.name: getattr(settings, limit.name) for limit in fields(cls)})


#: Each reason :attr:`Refusals.counted` is called with, and the status it answers.
REFUSAL_STATUSES: Final = {
    "header_timeout": 408,
    "body_timeout": 408,
    "header_too_large": 431,
    "too_many_connections": 503,
    "host_not_allowed": 421,
    "origin_not_allowed": 403,
}


@dataclass(frozen=True)
class Refusals:
    """How one server's refusals read and are counted.

    ``body`` makes each refusal's JSON body; ``counted`` is called once per refusal with
    its reason (``header_too_large``, ``header_timeout``, ``body_timeout``,
    ``too_many_connections``, ``host_not_allowed``, ``origin_not_allowed``), in the event
    loop's thread.
    """

    body: ErrorBody = json_error
    counted: Callable[[str], None] = field(default=_uncounted)
