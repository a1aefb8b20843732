"""Switchboard's processes beyond the routing fabric: workers, engine, detokenizers,
supervisor, command line and benchmarks."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("switchboard")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
