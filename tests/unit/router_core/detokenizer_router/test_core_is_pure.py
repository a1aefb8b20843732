"""The detokenizer router's core and effects load no zmq (the house rule of
tests/unit/house_rules/test_pure_modules.py, for the modules it does not list yet)."""

from __future__ import annotations

from tests.unit.house_rules.source_tree import source_graph
from tests.unit.house_rules.test_pure_modules import zmq_paths

CORE_MODULES = [
    "router_core.detokenizer_router.core",
    "router_core.detokenizer_router.effects",
]


def test_the_core_modules_load_no_zmq() -> None:
    """Neither their imports nor the package __init__ Python runs first reach zmq."""
    graph = source_graph()
    assert zmq_paths(graph, CORE_MODULES, loading=True) == {}
