"""Switchboard's processes beyond the routing fabric: workers, engine, detokenizers,
supervisor, command line and benchmarks."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs ~0.1 s at every process start.
    if name == "__version__":
        from router_core.version import package_version

        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
