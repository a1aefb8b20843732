"""The control socket: protocol, server-side dispatch and the clients."""

from router_core.control.client import AsyncControlClient, ControlClient
from router_core.control.protocol import (
    ControlError,
    ControlReply,
    ControlRequest,
    ControlTimeout,
    ErrorCode,
)
from router_core.control.server import DEFERRED, Command, ControlServer, ReplyTo

__all__ = [
    "DEFERRED",
    "AsyncControlClient",
    "Command",
    "ControlClient",
    "ControlError",
    "ControlReply",
    "ControlRequest",
    "ControlServer",
    "ControlTimeout",
    "ErrorCode",
    "ReplyTo",
]
