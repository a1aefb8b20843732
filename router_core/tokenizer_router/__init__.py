"""The tokenizer router process: workers <-> engine, registry, liveness, pause barrier."""

from router_core.tokenizer_router.router import ENGINE, TokenizerRouter
from router_core.tokenizer_router.settings import RouterSettings

__all__ = ["ENGINE", "RouterSettings", "TokenizerRouter"]
