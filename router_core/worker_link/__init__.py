"""The worker link: the public API an HTTP worker uses to take part in a Switchboard stack.

:class:`WorkerLink` registers and heartbeats, obeys pause and drain, sends requests and
hands each request's output rows to its :class:`ResponseStream`; it knows no HTTP.
"""

from router_core.worker_link.link import (
    RECEIVE_SPAN,
    AdmissionRefused,
    OutputsObserver,
    RouterUnavailable,
    WorkerLink,
)
from router_core.worker_link.session import WorkerIdentity, WorkerSession, op_sequence
from router_core.worker_link.settings import WorkerLinkSettings
from router_core.worker_link.streams import OutputRow, ResponseStream, finish_reason_of

__all__ = [
    "RECEIVE_SPAN",
    "AdmissionRefused",
    "OutputRow",
    "OutputsObserver",
    "ResponseStream",
    "RouterUnavailable",
    "WorkerIdentity",
    "WorkerLink",
    "WorkerLinkSettings",
    "WorkerSession",
    "finish_reason_of",
    "op_sequence",
]
