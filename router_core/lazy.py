"""Names a package exports but imports only when first used (PEP 562).

A package whose pure modules must load no zmq cannot import its socket-bound classes in
its ``__init__``: Python runs a package's ``__init__`` before any module inside it. Such a
package lists those names with :func:`lazy_exports` instead (and imports them under
``TYPE_CHECKING`` for the type checker); ``from package import Name`` still works.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of the package whose ``globals()`` is ``namespace``.

    ``exports`` maps each name to the module it is defined in; the first use of a name
    imports that module and keeps the value in ``namespace``, so later uses are plain
    lookups. Any other name is an ``AttributeError``, as for any module.
    """
    package = namespace["__name__"]
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
