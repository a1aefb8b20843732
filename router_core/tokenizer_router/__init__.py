"""The tokenizer router process: workers <-> engine, registry, liveness, pause barrier.

:class:`TokenizerRouter` (the shell, which owns the sockets) and :class:`RouterSettings`
are imported on first use (PEP 562), so the pure core modules of this package
(``core``, ``registration``, ``pause``, ``backward``, ``view``, ...) load no zmq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router_core.tokenizer_router.router import ENGINE, TokenizerRouter
    from router_core.tokenizer_router.settings import RouterSettings

__all__ = ["ENGINE", "RouterSettings", "TokenizerRouter"]

#: Each exported name and the module it comes from.
_EXPORTS = {
    "ENGINE": "router_core.wire.control",
    "RouterSettings": "router_core.tokenizer_router.settings",
    "TokenizerRouter": "router_core.tokenizer_router.router",
}


def __getattr__(name: str) -> Any:
    """Import an exported name on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
