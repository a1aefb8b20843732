"""The engine link: the public API an engine uses to take part in a Switchboard stack.

:class:`EngineLink` receives requests and commands (:class:`Request`, :class:`Command`),
sends batched outputs, acknowledges pause/continue and publishes load; ``docs/engine.md``
shows a complete engine built on it.
"""

from router_core.endpoints import EngineEndpoints, OutputsVia
from router_core.engine_link.inputs import Command, EngineInput, Request, read_input
from router_core.engine_link.link import MAX_BATCH_ROWS, EngineLink
from router_core.wire.control import ENGINE

__all__ = [
    "ENGINE",
    "MAX_BATCH_ROWS",
    "Command",
    "EngineEndpoints",
    "EngineInput",
    "EngineLink",
    "OutputsVia",
    "Request",
    "read_input",
]
