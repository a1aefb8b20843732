"""House rule: every router_core and httpkit module's ``__all__`` lists only names it
defines, each once."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import httpkit
import router_core


def library_module_names(packages: tuple[ModuleType, ...] = (router_core, httpkit)) -> list[str]:
    """Every module name of ``packages`` (the libraries others import), found with pkgutil.

    A subpackage that fails to import is still listed, so that its test fails loudly
    instead of the walk skipping it.
    """
    names = []
    for package in packages:
        names.append(package.__name__)
        walk = pkgutil.walk_packages(
            package.__path__, prefix=f"{package.__name__}.", onerror=names.append
        )
        names.extend(info.name for info in walk)
    return sorted(set(names))


class TestExportedNames:
    """Every router_core and httpkit module's __all__ lists only names it defines."""

    def test_walk_finds_the_wire_package(self) -> None:
        """The module walk reaches nested modules, so the check is not vacuous."""
        names = set(library_module_names())
        assert {"router_core.wire", "router_core.wire.codec", "router_core.wire.split"} <= names
        assert {"httpkit.serving", "httpkit.spans"} <= names

    @pytest.mark.parametrize("name", library_module_names())
    def test_all_names_exist(self, name: str) -> None:
        """The module imports, and each name in its __all__ is an attribute, listed once."""
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            return
        assert all(isinstance(name, str) for name in exported)
        assert [name for name in exported if not hasattr(module, name)] == []
        assert len(set(exported)) == len(exported)
