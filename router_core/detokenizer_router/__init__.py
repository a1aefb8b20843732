"""The detokenizer router process: engine outputs to N detokenizers, sticky per worker.

``core`` decides (decoded messages and the time in, ``effects`` out, with the
``picker``); ``router`` is the shell that owns the sockets and carries the effects out.
The socket-bound names (``DetokenizerRouter``, ``DetokenizerRouterSettings``) are
imported on first use (PEP 562), so importing the pure core or picker loads no zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from router_core.detokenizer_router.picker import DetokenizerPicker, StickyKey
from router_core.lazy import lazy_exports

if TYPE_CHECKING:
    from router_core.detokenizer_router.router import DetokenizerRouter
    from router_core.detokenizer_router.settings import DetokenizerRouterSettings

__all__ = ["DetokenizerPicker", "DetokenizerRouter", "DetokenizerRouterSettings", "StickyKey"]

#: The module each socket-bound name is imported from on first use.
_LAZY: Final = {
    "DetokenizerRouter": "router_core.detokenizer_router.router",
    "DetokenizerRouterSettings": "router_core.detokenizer_router.settings",
}

__getattr__ = lazy_exports(globals(), _LAZY)
