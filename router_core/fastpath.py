"""The optional C fast paths, and how they are wired to pyzmq's own libzmq.

pyzmq spends about a microsecond of Python per frame sent or received, and the routers
move messages of several frames at rates where that dominates. ``_fastpath.c`` offers:

* ``forward``: the forward hop's whole loop, for the request messages it can prove
  well-formed (everything else is handed back to the Python path);
* ``recv_frames`` / ``send_frames``: one call per message instead of one per frame,
  used by :mod:`router_core.transport`.

They are an optimisation only: :func:`native` returns None when the extension is not
built, libzmq cannot be found, or ``SWITCHBOARD_NO_FASTPATH`` is set, and every caller
then uses plain pyzmq.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
from collections.abc import Iterable
from types import ModuleType
from typing import Final, NamedTuple

import zmq

__all__ = ["BLOCKED", "BUDGET", "EMPTY", "HANDOFF", "FastForwarder", "ForwardResult", "load"]

logger = logging.getLogger(__name__)

#: Outcomes of one :meth:`FastForwarder.forward` call.
EMPTY: Final = 0  # the source has no more messages
BUDGET: Final = 1  # the budget ran out; call again
HANDOFF: Final = 2  # ``frames`` is a message for the Python path
BLOCKED: Final = 3  # the destination refused ``frames`` (EAGAIN): queue it

_FUNCTIONS: Final = (
    "zmq_msg_init",
    "zmq_msg_close",
    "zmq_msg_recv",
    "zmq_msg_send",
    "zmq_msg_data",
    "zmq_msg_size",
    "zmq_msg_more",
    "zmq_errno",
    "zmq_poll",
    "zmq_send",
)

_DISABLE_ENV: Final = "SWITCHBOARD_NO_FASTPATH"


def as_zmq_error(exc: OSError) -> zmq.ZMQError:
    """The pyzmq exception for an ``OSError(errno, ...)`` raised by the C extension.

    So callers catch the same exceptions (``zmq.ContextTerminated`` at shutdown, say)
    whether or not the fast path is in use.
    """
    errno = exc.errno or 0
    if errno == zmq.ETERM:
        return zmq.ContextTerminated(errno)
    if errno == zmq.EAGAIN:
        return zmq.Again(errno)
    return zmq.ZMQError(errno)


class ForwardResult(NamedTuple):
    """What one call did: its outcome, messages forwarded per kind, a handed-back message.

    ``sources`` is ``(reply_to address, messages, bytes)`` per owning worker forwarded in
    this call; ``latency_counts`` the hop latencies (now minus the header's ``sent_ns``)
    per bucket of the ``bounds_ns`` passed in, plus ``+Inf``; ``latency_sum_s`` their sum.
    """

    status: int
    counts: list[int]
    frames: list[bytes] | None
    sources: list[tuple[bytes, int, int]]
    latency_counts: list[int]
    latency_sum_s: float


class FastForwarder:
    """Forwards canonical request messages from one socket to another in C."""

    def __init__(self, module: ModuleType, kinds: Iterable[int]) -> None:
        self._module = module
        self.kinds = bytes(sorted(kinds))

    def forward(
        self,
        src: zmq.Socket[bytes],
        dst: zmq.Socket[bytes],
        budget: int,
        linger_ms: int = 1,
        *,
        bounds_ns: tuple[int, ...] = (),
        untraced_only: bool = False,
    ) -> ForwardResult:
        """Move up to ``budget`` messages; stops early on the outcomes above.

        When ``src`` runs dry it waits up to ``linger_ms`` (GIL released) for the next
        message before returning ``EMPTY``, so a steady stream is moved without a trip
        through the Python loop per message. With ``untraced_only`` a request carrying a
        trace context is handed back, so the Python path can make its span.
        """
        try:
            status, counts, frames, (sources, latency, latency_sum) = self._module.forward(
                src.underlying, dst.underlying, budget, self.kinds, linger_ms, bounds_ns,
                untraced_only,
            )  # fmt: skip
        except OSError as exc:
            raise as_zmq_error(exc) from exc
        return ForwardResult(status, counts, frames, sources, latency, latency_sum)

    def header_kind(self, header: bytes, *, untraced_only: bool = False) -> int:
        """The kind the C check reads from ``header``, or -1 if it would hand it back."""
        kind: int = self._module.header_kind(header, self.kinds, untraced_only)
        return kind


def _libzmq_path() -> str | None:
    """The file of the libzmq that pyzmq has loaded into this process."""
    zmq.zmq_version()  # libzmq is loaded once pyzmq has answered this
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if "libzmq" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


_native: ModuleType | None = None
_native_checked = False


def native() -> ModuleType | None:
    """The bound C extension, or None (logged once) if it cannot be used here."""
    global _native, _native_checked  # noqa: PLW0603  (a process-wide, load-once binding)
    if _native_checked:
        return _native
    _native_checked = True
    if os.environ.get(_DISABLE_ENV):
        return None
    try:
        _fastpath = importlib.import_module("router_core._fastpath")
    except ImportError:
        logger.info("C fast path not built; routing runs in pure Python")
        return None
    path = _libzmq_path()
    if path is None:
        logger.info("libzmq not found in this process; routing runs in pure Python")
        return None
    library = ctypes.CDLL(path)
    addresses = [ctypes.cast(getattr(library, name), ctypes.c_void_p).value for name in _FUNCTIONS]
    _fastpath.bind_libzmq(*addresses)
    _native = _fastpath
    return _native


def load(kinds: Iterable[int]) -> FastForwarder | None:
    """The C forward loop for messages of ``kinds``, or None if it cannot be used here."""
    module = native()
    return None if module is None else FastForwarder(module, kinds)
