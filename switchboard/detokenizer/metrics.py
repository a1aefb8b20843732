"""The detokenizer's Prometheus series: outputs it delivers straight to workers.

In direct fan-out mode (``outputs_to="workers"``) a detokenizer, not a router, delivers
the ``backward`` route, so it counts ``switchboard_messages_total{route="backward",worker}``
and ``switchboard_message_bytes_total{route="backward",worker}`` (``docs/metrics.md``)
through ``prometheus_client`` in multiprocess mode. The counters exist only when
``PROMETHEUS_MULTIPROC_DIR`` is set (``switchboard up`` sets it); otherwise
:class:`BackwardTraffic` records nothing and ``prometheus_client`` is not imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

from router_core.transport import FrameLike

if TYPE_CHECKING:
    from prometheus_client import Counter

__all__ = ["BACKWARD", "BackwardTraffic", "worker_label"]

#: The route label of outputs delivered to a worker.
BACKWARD: Final = "backward"
#: The prefix of a worker's default return address file (``worker-<id>``).
_WORKER_PREFIX: Final = "worker-"


def worker_label(address: str) -> str:
    """The ``worker`` label of a return address: ``w0`` for the default
    ``ipc://<run dir>/worker-w0``, else the address itself (a worker given ``--address``)."""
    if address.startswith("ipc://"):
        name = PurePosixPath(address.removeprefix("ipc://")).name
        if name.startswith(_WORKER_PREFIX) and len(name) > len(_WORKER_PREFIX):
            return name.removeprefix(_WORKER_PREFIX)
    return address


class BackwardTraffic:
    """Counts messages and bytes sent to each worker; a no-op without counters."""

    def __init__(self, messages: Counter | None = None, message_bytes: Counter | None = None):
        self._messages = messages
        self._bytes = message_bytes
        #: Per address: the two labelled children (``labels()`` is a dict walk and a lock).
        self._children: dict[str, tuple[Counter, Counter]] = {}

    @property
    def recording(self) -> bool:
        """Whether anything is counted."""
        return self._messages is not None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> BackwardTraffic:
        """Counting into the multiprocess directory if ``PROMETHEUS_MULTIPROC_DIR`` is set
        in ``environ`` (default ``os.environ``), else the no-op recorder."""
        environ = os.environ if environ is None else environ
        if not environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return cls()
        from prometheus_client import Counter

        labels = ("route", "worker")
        # registry=None: in multiprocess mode the admin app's collector reads the files,
        # and a second recorder in one process (tests) must not clash on registration.
        return cls(
            Counter(
                "switchboard_messages",
                "Messages per route and worker.",
                labels,
                registry=None,
            ),
            Counter(
                "switchboard_message_bytes",
                "Bytes of messages per route and worker (all frames).",
                labels,
                registry=None,
            ),
        )

    def record(self, address: str, frames: Sequence[FrameLike]) -> None:
        """Count one message of ``frames`` delivered to the worker at ``address``."""
        if self._messages is None or self._bytes is None:
            return
        children = self._children.get(address)
        if children is None:
            label = worker_label(address)
            children = (
                self._messages.labels(BACKWARD, label),
                self._bytes.labels(BACKWARD, label),
            )
            self._children[address] = children
        children[0].inc()
        children[1].inc(sum(len(frame) for frame in frames))
