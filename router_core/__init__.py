"""Switchboard's ZeroMQ routing fabric.

``router_core`` knows nothing of HTTP: the admin app and the CLI reach a running router
through :class:`router_core.control.ControlClient`. An engine takes part through
:class:`router_core.EngineLink` (see ``docs/engine.md``).

The engine link's names are imported on first use (:mod:`router_core.lazy`): importing a
pure module of this package (``router_core.wire``, ``router_core.registry``, ...) loads
no zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router_core.lazy import lazy_exports

if TYPE_CHECKING:
    from router_core.engine_link import (
        Command,
        EngineEndpoints,
        EngineInput,
        EngineLink,
        Request,
    )

__all__ = ["Command", "EngineEndpoints", "EngineInput", "EngineLink", "Request"]

__getattr__ = lazy_exports(globals(), dict.fromkeys(__all__, "router_core.engine_link"))
