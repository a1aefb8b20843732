"""The worker link: the public API an HTTP worker uses to take part in a Switchboard stack.

:class:`WorkerLink` registers and heartbeats, obeys pause and drain, sends requests and
hands each request's output rows to its :class:`ResponseStream`; it knows no HTTP.
Inside it: ``sockets`` (the three sockets and the one send path), ``dispatch`` (the pure
core: what each inbound message does, as ``effects``), ``shell`` (the time in, the
effects carried out), ``session`` (pure protocol state), ``timer`` (registration and
heartbeats).

The socket-bound names (``WorkerLink``, ``WorkerLinkSettings``) are imported on first use
(PEP 562), so importing a pure module of this package loads no zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from router_core.lazy import lazy_exports
from router_core.worker_link.dispatch import RECEIVE_SPAN, OutputsObserver
from router_core.worker_link.errors import AdmissionRefused, RequestLost, RouterUnavailable
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.streams import OutputRow, ResponseStream, finish_reason_of

if TYPE_CHECKING:
    from router_core.worker_link.link import WorkerLink
    from router_core.worker_link.settings import WorkerLinkSettings

__all__ = [
    "RECEIVE_SPAN",
    "AdmissionRefused",
    "OutputRow",
    "OutputsObserver",
    "RequestLost",
    "ResponseStream",
    "RouterUnavailable",
    "WorkerIdentity",
    "WorkerLink",
    "WorkerLinkSettings",
    "WorkerSession",
    "finish_reason_of",
]

#: The module each socket-bound name is imported from on first use.
_LAZY: Final = {
    "WorkerLink": "router_core.worker_link.link",
    "WorkerLinkSettings": "router_core.worker_link.settings",
}

__getattr__ = lazy_exports(globals(), _LAZY)
