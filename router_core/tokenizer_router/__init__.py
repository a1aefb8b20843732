"""The tokenizer router process: workers <-> engine, registry, liveness, pause barrier.

:class:`TokenizerRouter` (the shell, which owns the sockets) and :class:`RouterSettings`
are imported on first use (PEP 562), so the pure core modules of this package
(``core``, ``registration``, ``pause``, ``backward``, ``view``, ...) load no zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router_core.lazy import lazy_exports

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

__getattr__ = lazy_exports(globals(), _EXPORTS)
