"""lazy_exports: a package's names imported on first use, cached, others refused."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from router_core.lazy import lazy_exports


class TestLazyExports:
    """The module __getattr__ that lazy_exports makes."""

    def test_a_name_is_imported_on_first_use_and_kept(self) -> None:
        """The first lookup imports the module and stores the value in the namespace."""
        namespace: dict[str, Any] = {"__name__": "pkg"}
        getattr_ = lazy_exports(namespace, {"dumps": "json"})
        assert getattr_("dumps") is sys.modules["json"].dumps
        assert namespace["dumps"] is sys.modules["json"].dumps

    def test_the_module_is_not_imported_before_use(self) -> None:
        """Making the table imports nothing."""
        sys.modules.pop("xml.dom.minidom", None)
        lazy_exports({"__name__": "pkg"}, {"parseString": "xml.dom.minidom"})
        assert "xml.dom.minidom" not in sys.modules

    def test_another_name_is_an_attribute_error(self) -> None:
        """A name not listed raises AttributeError naming the package."""
        getattr_ = lazy_exports({"__name__": "pkg"}, {})
        with pytest.raises(AttributeError, match="'pkg' has no attribute 'nope'"):
            getattr_("nope")
