"""The control socket: protocol, commands and replies, server-side dispatch and the clients.

The protocol, the command catalogue (:mod:`router_core.control.commands`) and the reply
structs (:mod:`router_core.control.replies`) are pure data. The classes that own sockets
(``ControlClient``, ``AsyncControlClient``, ``ControlServer``) are imported on first use,
so pure code (a router's handlers) can use the protocol without loading zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router_core.control.command_model import ControlCommand
from router_core.control.protocol import (
    ControlError,
    ControlReply,
    ControlRequest,
    ControlTimeout,
    ErrorCode,
)
from router_core.control.table import DEFERRED, Command, ReplyTo
from router_core.lazy import lazy_exports

if TYPE_CHECKING:
    from router_core.control.client import AsyncControlClient, ControlClient, control_client_keys
    from router_core.control.server import ControlServer

__all__ = [
    "DEFERRED",
    "AsyncControlClient",
    "Command",
    "ControlClient",
    "ControlCommand",
    "ControlError",
    "ControlReply",
    "ControlRequest",
    "ControlServer",
    "ControlTimeout",
    "ErrorCode",
    "ReplyTo",
    "control_client_keys",
]

#: Names that need zmq, and the module each comes from.
_SOCKET_BOUND = {
    "AsyncControlClient": "router_core.control.client",
    "control_client_keys": "router_core.control.client",
    "ControlClient": "router_core.control.client",
    "ControlServer": "router_core.control.server",
}

__getattr__ = lazy_exports(globals(), _SOCKET_BOUND)
