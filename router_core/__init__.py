"""Switchboard's ZeroMQ routing fabric.

``router_core`` knows nothing of HTTP: the admin app and the CLI reach a running router
through :class:`router_core.control.ControlClient`. An engine takes part through
:class:`router_core.EngineLink` (see ``docs/engine.md``).

The engine link's names are imported on first use (PEP 562): importing a pure module of
this package (``router_core.wire``, ``router_core.registry``, ...) loads no zmq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router_core.engine_link import (
        Command,
        EngineEndpoints,
        EngineInput,
        EngineLink,
        Request,
    )

__all__ = ["Command", "EngineEndpoints", "EngineInput", "EngineLink", "Request"]


def __getattr__(name: str) -> Any:
    """Import an engine-link name on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("router_core.engine_link"), name)
    globals()[name] = value
    return value
