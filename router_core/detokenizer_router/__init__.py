"""The detokenizer router process: engine outputs to N detokenizers, sticky per worker.

The socket-bound names (``DetokenizerRouter``, ``DetokenizerRouterSettings``) are
imported on first use (PEP 562), so importing the pure picker loads no zmq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from router_core.detokenizer_router.picker import DetokenizerPicker, StickyKey

if TYPE_CHECKING:
    from router_core.detokenizer_router.router import DetokenizerRouter
    from router_core.detokenizer_router.settings import DetokenizerRouterSettings

__all__ = ["DetokenizerPicker", "DetokenizerRouter", "DetokenizerRouterSettings", "StickyKey"]

#: The module each socket-bound name is imported from on first use.
_LAZY: Final = {
    "DetokenizerRouter": "router_core.detokenizer_router.router",
    "DetokenizerRouterSettings": "router_core.detokenizer_router.settings",
}


def __getattr__(name: str) -> Any:
    """Import a socket-bound name on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
