"""The operator commands' package: every module lists in ``__all__`` only names it has."""

from __future__ import annotations

import importlib

import pytest


class TestExports:
    """Every module of the package lists in ``__all__`` only names it has."""

    @pytest.mark.parametrize("name", ["", ".client", ".commands", ".errors", ".render"])
    def test_all_names_exist(self, name: str) -> None:
        """Each name in __all__ is an attribute, listed once."""
        module = importlib.import_module(f"switchboard.admin_cli{name}")
        exported = module.__all__
        assert [item for item in exported if not hasattr(module, item)] == []
        assert len(set(exported)) == len(exported)
