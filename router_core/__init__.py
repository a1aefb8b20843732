"""Switchboard's ZeroMQ routing fabric.

``router_core`` knows nothing of HTTP: the admin app and the CLI reach a running router
through :class:`router_core.control.ControlClient`. An engine takes part through
:class:`router_core.EngineLink` (see ``docs/engine.md``).
"""

from router_core.engine_link import (
    Command,
    EngineEndpoints,
    EngineInput,
    EngineLink,
    Request,
)

__all__ = ["Command", "EngineEndpoints", "EngineInput", "EngineLink", "Request"]
