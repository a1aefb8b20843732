"""The detokenizer router process: engine outputs to N detokenizers, sticky per worker."""

from router_core.detokenizer_router.picker import DetokenizerPicker, StickyKey
from router_core.detokenizer_router.router import DetokenizerRouter
from router_core.detokenizer_router.settings import DetokenizerRouterSettings

__all__ = ["DetokenizerPicker", "DetokenizerRouter", "DetokenizerRouterSettings", "StickyKey"]
