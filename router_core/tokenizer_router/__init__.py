"""The tokenizer router process: workers <-> engine, registry, liveness, pause barrier."""

from router_core.tokenizer_router.router import ENGINE, RouterSettings, TokenizerRouter

__all__ = ["ENGINE", "RouterSettings", "TokenizerRouter"]
