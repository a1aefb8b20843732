"""House rule: top-level packages import one way only, down the tiers (router_core <-
httpkit <- app <- switchboard <- dashboards and examples), and never around a loop."""

from __future__ import annotations

from tests.support.import_graph import ImportGraph, tier_violations
from tests.unit.house_rules.source_tree import PACKAGE_TIERS, source_graph


class TestPackageLayers:
    """Top-level packages import one way only, down :data:`PACKAGE_TIERS`."""

    def test_scanner_catches_an_upward_import(self) -> None:
        """An app module importing switchboard, and a package no tier places, are caught."""
        graph = ImportGraph.from_sources(
            {
                "app/x.py": "def f():\n    import switchboard.y",
                "switchboard/y.py": "import app.x",
                "extra/z.py": "",
            }
        )
        assert tier_violations(graph, PACKAGE_TIERS) == [
            "extra is in no tier",
            "app -> switchboard: app.x imports switchboard.y (line 2)",
        ]
        assert [cycle.path for cycle in graph.packages().cycles()] == [
            ("app", "switchboard", "app")
        ]

    def test_packages_import_only_lower_tiers(self) -> None:
        """Every import between top-level packages points down the tiers."""
        assert tier_violations(source_graph(), PACKAGE_TIERS) == []

    def test_no_cycles_between_packages(self) -> None:
        """No two top-level packages import each other, directly or around a loop."""
        assert [str(cycle) for cycle in source_graph().packages().cycles()] == []
