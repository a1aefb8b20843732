"""House rule: no import cycle between first-party modules, read from the import graph,
whose construction is checked first (each way of importing is an edge)."""

from __future__ import annotations

from tests.support.import_graph import ImportGraph
from tests.unit.house_rules.source_tree import GRAPH_ROOTS, source_graph


class TestImportGraph:
    """The import graph the boundary rules read: each way of importing is an edge."""

    def test_cycle_found_and_named(self) -> None:
        """Two modules importing each other are one cycle, reported by their names."""
        graph = ImportGraph.from_sources(
            {"pkg/__init__.py": "", "pkg/a.py": "import pkg.b", "pkg/b.py": "from pkg import a"}
        )
        assert [str(cycle) for cycle in graph.cycles()] == ["pkg.a -> pkg.b -> pkg.a"]

    def test_cycle_report_names_the_whole_group(self) -> None:
        """A group of mutually importing modules is reported whole, beyond one cycle."""
        graph = ImportGraph.from_sources(
            {
                "m/a.py": "import m.b",
                "m/b.py": "import m.a\nimport m.c",
                "m/c.py": "import m.a",
            }
        )
        [cycle] = graph.cycles()
        assert cycle.path == ("m.a", "m.b", "m.a")
        assert str(cycle) == "m.a -> m.b -> m.a (with m.c)"

    def test_import_inside_a_function_counts(self) -> None:
        """A deferred import inside a function is still an edge of the graph."""
        graph = ImportGraph.from_sources(
            {"pkg/a.py": "import pkg.b", "pkg/b.py": "def f():\n    from pkg.a import x"}
        )
        assert [cycle.path for cycle in graph.cycles()] == [("pkg.a", "pkg.b", "pkg.a")]

    def test_type_checking_imports_do_not_count(self) -> None:
        """An import under ``if TYPE_CHECKING:`` is no edge; its ``else`` branch is."""
        graph = ImportGraph.from_sources(
            {
                "pkg/a.py": "import pkg.b",
                "pkg/b.py": "if TYPE_CHECKING:\n    import pkg.a\nelse:\n    import pkg.c",
                "pkg/c.py": "",
            }
        )
        assert graph.cycles() == []
        assert graph.edges["pkg.b"] == {"pkg.c": 4}

    def test_from_import_depends_on_the_module_it_names(self) -> None:
        """``from pkg import name`` is an edge to pkg.name when that is a module, else to
        pkg; ``from pkg.mod import name`` is an edge to pkg.mod."""
        graph = ImportGraph.from_sources(
            {
                "pkg/__init__.py": "from pkg.tools import helper",
                "pkg/tools.py": "def helper(): ...",
                "pkg/user.py": "from pkg import helper, tools\nfrom pkg.tools import helper",
            }
        )
        assert set(graph.edges["pkg.user"]) == {"pkg", "pkg.tools"}
        assert set(graph.edges["pkg"]) == {"pkg.tools"}

    def test_relative_imports_resolve_against_the_package(self) -> None:
        """``from . import x`` and ``from ..y import z`` name modules of the right package."""
        graph = ImportGraph.from_sources(
            {
                "pkg/__init__.py": "",
                "pkg/y.py": "z = 1",
                "pkg/sub/__init__.py": "from . import x",
                "pkg/sub/x.py": "from ..y import z",
            }
        )
        assert graph.edges["pkg.sub"] == {"pkg.sub.x": 1}
        assert graph.edges["pkg.sub.x"] == {"pkg.y": 1}

    def test_c_extension_is_a_module_of_its_own(self) -> None:
        """Importing a C extension from its package depends on the extension, not the
        package, so a package re-exporting the extension's user is no cycle."""
        graph = ImportGraph.from_sources(
            {
                "pkg/__init__.py": "from pkg.user import run",
                "pkg/user.py": "def run():\n    from pkg import _ext",
                "pkg/_ext.c": None,
            }
        )
        assert graph.edges["pkg.user"] == {"pkg._ext": 2}
        assert graph.cycles() == []

    def test_graph_reads_the_tree(self) -> None:
        """The real graph holds known edges, and the C fast path among its modules."""
        graph = source_graph()
        assert "router_core._fastpath" in graph.modules
        assert "httpkit.spans" in graph.edges["app.main"]
        assert "router_core.wire.header" in graph.edges["router_core.wire.codec"]
        assert {module.partition(".")[0] for module in graph.modules} == set(GRAPH_ROOTS)

    def test_no_import_cycles_between_modules(self) -> None:
        """No two first-party modules import each other, directly or around a loop."""
        assert [str(cycle) for cycle in source_graph().cycles()] == []
