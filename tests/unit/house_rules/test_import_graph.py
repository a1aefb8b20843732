"""House rules checked against the source tree: no pickle, honest ``__all__``, no wildcard binds.

Each rule scans parsed source (``ast``), so a comment or docstring that names a forbidden
thing does not trip it, and each scanner is first shown to catch a violation it is fed.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import httpkit
import router_core
from tests.support.import_graph import (
    ImportGraph,
    module_name,
    runtime_import_nodes,
    tier_violations,
)

REPO = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = ("router_core", "httpkit", "app", "switchboard")
#: The one place that pickles on purpose: the seed-style baseline the router bench beats.
PICKLE_ALLOWED = frozenset({Path("switchboard/bench/naive.py")})
#: Code that speaks HTTP, and so must reach the router only through router_core clients.
HTTP_ROOTS = ("httpkit", "app", "switchboard/worker")
#: Modules that make a package an HTTP package.
HTTP_MODULES = frozenset({"fastapi", "starlette", "uvicorn", "httpx", "h11", "httptools"})

#: Modules that deserialize by running code; pickle over ZeroMQ is how serving stacks got RCEs.
PICKLE_MODULES = frozenset({"pickle", "_pickle", "cPickle", "cloudpickle", "dill"})
#: pyzmq's convenience methods that pickle implicitly.
PICKLE_SOCKET_METHODS = frozenset({"send_pyobj", "recv_pyobj"})
#: Importers that take a module name as a string.
DYNAMIC_IMPORTERS = frozenset({"__import__", "import_module"})
#: Endpoints that listen on every interface.
WILDCARD_BIND = re.compile(r"tcp://(\*|0\.0\.0\.0|\[::\]|::)(:|$)")

#: Top-level packages from the bottom up: each imports only packages of the tiers below
#: its own (router_core <- httpkit <- app <- switchboard; dashboards and examples on top).
PACKAGE_TIERS: tuple[tuple[str, ...], ...] = (
    ("router_core",),
    ("httpkit",),
    ("app",),
    ("switchboard",),
    ("dashboards", "examples"),
)
#: Every package the import graph reads.
GRAPH_ROOTS = tuple(package for tier in PACKAGE_TIERS for package in tier)
#: Pure logic (decoded messages in; data, decisions or frames out): importing one of
#: these loads no zmq. Globs relative to the repository, each naming at least one file.
PURE_MODULES = (
    "router_core/wire/*.py",
    "router_core/registry.py",
    "router_core/barrier.py",
    "router_core/detokenizer_router/picker.py",
    "router_core/histogram.py",
    "router_core/worker_link/session.py",
    "switchboard/supervisor/layout.py",
    # The tokenizer router's core: handlers take decoded messages and return effects.
    "router_core/tokenizer_router/backward.py",
    "router_core/tokenizer_router/commands.py",
    "router_core/tokenizer_router/core.py",
    "router_core/tokenizer_router/dispatch.py",
    "router_core/tokenizer_router/effects.py",
    "router_core/tokenizer_router/engine_events.py",
    "router_core/tokenizer_router/pause.py",
    "router_core/tokenizer_router/registration.py",
    "router_core/tokenizer_router/view.py",
)


def source_files(roots: tuple[str, ...] = SOURCE_ROOTS) -> list[Path]:
    """Every Python file under ``roots``."""
    return sorted(path for root in roots for path in (REPO / root).rglob("*.py"))


def imported_top_modules(tree: ast.AST) -> set[str]:
    """The top-level names of every module ``tree`` imports (absolute imports)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def runtime_imports(tree: ast.Module) -> set[str]:
    """Like :func:`imported_top_modules`, leaving out ``if TYPE_CHECKING:`` blocks (types
    only, never imported when the code runs)."""
    found = set()
    for node in runtime_import_nodes(tree):
        found.update(imported_top_modules(node))
    return found


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def pickle_uses(tree: ast.AST) -> Iterator[str]:
    """Describe every import of a pickling module and every pickling socket call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] in PICKLE_MODULES:
                    yield f"line {node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").partition(".")[0]
            names = {alias.name for alias in node.names}
            if module in PICKLE_MODULES or (module in {"", "zmq"} and names & PICKLE_MODULES):
                yield f"line {node.lineno}: from {node.module} import {sorted(names)}"
        elif isinstance(node, ast.Attribute) and node.attr in PICKLE_SOCKET_METHODS:
            yield f"line {node.lineno}: .{node.attr}"
        elif isinstance(node, ast.Call) and _called_name(node) in DYNAMIC_IMPORTERS:
            for argument in node.args[:1]:
                if isinstance(argument, ast.Constant) and argument.value in PICKLE_MODULES:
                    yield f"line {node.lineno}: dynamic import of {argument.value}"
        elif isinstance(node, ast.Call) and _called_name(node) == "getattr":
            for argument in node.args[1:2]:
                if isinstance(argument, ast.Constant) and argument.value in PICKLE_SOCKET_METHODS:
                    yield f"line {node.lineno}: getattr(..., {argument.value!r})"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings (they describe, they do not bind)."""
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def wildcard_binds(tree: ast.AST) -> Iterator[str]:
    """Describe every string literal (docstrings aside) naming a wildcard tcp endpoint."""
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and WILDCARD_BIND.search(node.value)
        ):
            yield f"line {node.lineno}: {node.value!r}"


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


@functools.cache
def source_graph() -> ImportGraph:
    """The import graph of every module under :data:`GRAPH_ROOTS`, read once."""
    return ImportGraph.from_tree(REPO, GRAPH_ROOTS)


def zmq_paths(graph: ImportGraph, modules: list[str], *, loading: bool) -> dict[str, list[str]]:
    """For each of ``modules`` that reaches zmq, the chain of modules that does: through
    imports alone, or (``loading``) through everything importing it runs."""
    find = graph.loading_path if loading else graph.import_path
    loaders = graph.importers_of("zmq")
    return {module: path for module in modules if (path := find(module, loaders))}


def pure_module_names(patterns: tuple[str, ...] = PURE_MODULES) -> tuple[list[str], list[str]]:
    """The module names :data:`PURE_MODULES` lists, and the patterns naming no file."""
    names, empty = [], []
    for pattern in patterns:
        paths = sorted(REPO.glob(pattern))
        if not paths:
            empty.append(pattern)
        for path in paths:
            found = module_name(path.relative_to(REPO).as_posix())
            assert found is not None, path
            names.append(found[0])
    return names, empty


class TestLayering:
    """router_core knows no HTTP; HTTP code knows no zmq (they meet in router_core clients)."""

    def test_router_core_imports_no_http(self) -> None:
        """No router_core module imports an HTTP framework, server or client."""
        offenders = {
            str(path.relative_to(REPO)): sorted(found)
            for path in source_files(("router_core",))
            if (found := imported_top_modules(parse(path)) & HTTP_MODULES)
        }
        assert offenders == {}

    def test_router_core_keeps_metrics_and_tracing_libraries_out(self) -> None:
        """router_core never imports prometheus_client (routers expose their state through
        the control socket) and imports OpenTelemetry only inside router_core.tracing
        (type-only imports aside)."""
        offenders = {}
        for path in source_files(("router_core",)):
            found = runtime_imports(parse(path)) & {"prometheus_client", "opentelemetry"}
            if path.parent.name == "tracing":
                found.discard("opentelemetry")
            if found:
                offenders[str(path.relative_to(REPO))] = sorted(found)
        assert offenders == {}

    def test_runtime_imports_skip_type_only_blocks(self) -> None:
        """The scan sees imports in functions but not under ``if TYPE_CHECKING:``."""
        source = (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from opentelemetry.trace import Span\n"
            "def f():\n    import prometheus_client\n"
        )
        assert runtime_imports(ast.parse(source)) == {"typing", "prometheus_client"}

    def test_http_code_imports_no_zmq(self) -> None:
        """No module of httpkit, the admin app or the HTTP worker imports zmq."""
        files = source_files(HTTP_ROOTS)
        assert any(path.name == "app.py" for path in files)
        offenders = [
            str(path.relative_to(REPO))
            for path in files
            if "zmq" in imported_top_modules(parse(path))
        ]
        assert offenders == []


class TestNoPickle:
    """No source module pickles, directly or through pyzmq (the bench's baseline aside)."""

    @pytest.mark.parametrize(
        "source",
        [
            "import pickle",
            "import cloudpickle as cp",
            "from dill import dumps",
            "from pickle import loads",
            "import _pickle",
            "sock.send_pyobj(message)",
            "message = sock.recv_pyobj()",
            "importlib.import_module('pickle')",
            "__import__('dill')",
            "getattr(sock, 'recv_pyobj')()",
        ],
    )
    def test_scanner_catches_pickling(self, source: str) -> None:
        """The scanner flags each way of pickling it is fed."""
        assert list(pickle_uses(ast.parse(source)))

    def test_scanner_ignores_prose(self) -> None:
        """A docstring or comment that names pickle is not a use of it."""
        assert not list(pickle_uses(ast.parse('"""Never pickle; no send_pyobj."""  # pickle')))

    def test_sources_are_scanned(self) -> None:
        """The scan covers the wire codec, so an empty glob cannot pass vacuously."""
        assert REPO / "router_core" / "wire" / "codec.py" in source_files()

    def test_no_pickle_imports_or_calls(self) -> None:
        """No source imports a pickling module or calls send_pyobj/recv_pyobj."""
        offenders = {
            str(path.relative_to(REPO)): uses
            for path in source_files()
            if path.relative_to(REPO) not in PICKLE_ALLOWED
            if (uses := list(pickle_uses(parse(path))))
        }
        assert offenders == {}

    def test_pyobj_methods_absent_from_text(self) -> None:
        """The names send_pyobj and recv_pyobj appear nowhere in the source text."""
        pattern = re.compile("|".join(sorted(PICKLE_SOCKET_METHODS)))
        offenders = [
            f"{path.relative_to(REPO)}:{number}"
            for path in source_files()
            if path.relative_to(REPO) not in PICKLE_ALLOWED
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)
        ]
        assert offenders == []


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


class TestNoWildcardBinds:
    """No source under router_core/ or app/ names tcp://* or tcp://0.0.0.0."""

    @pytest.mark.parametrize(
        "source",
        [
            "sock.bind('tcp://*:5555')",
            "ENDPOINT = 'tcp://0.0.0.0:7000'",
            "address = f'tcp://*:{port}'",
            "sock.bind('tcp://[::]:5555')",
        ],
    )
    def test_scanner_catches_wildcards(self, source: str) -> None:
        """The scanner flags each wildcard endpoint literal it is fed."""
        assert list(wildcard_binds(ast.parse(source)))

    @pytest.mark.parametrize(
        "source",
        [
            "sock.bind('tcp://127.0.0.1:5555')",
            "sock.bind('ipc:///tmp/switchboard/router')",
            "def bind():\n    '''Never bind tcp://0.0.0.0 or tcp://*.'''",
            "pattern = 'tcp://0.0.0.1:5'",
        ],
    )
    def test_scanner_passes_loopback_and_prose(self, source: str) -> None:
        """Loopback, ipc endpoints and docstrings are not flagged."""
        assert not list(wildcard_binds(ast.parse(source)))

    def test_no_wildcard_binds(self) -> None:
        """No string literal in the source names a wildcard tcp endpoint."""
        offenders = {
            str(path.relative_to(REPO)): binds
            for path in source_files()
            if (binds := list(wildcard_binds(parse(path))))
        }
        assert offenders == {}


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


class TestPureModules:
    """The pure modules of :data:`PURE_MODULES` load no zmq, directly or transitively."""

    def test_scanner_follows_imports_and_parent_packages(self) -> None:
        """zmq behind a first-party import is found with its chain; zmq in a package
        ``__init__`` only when asking what importing the module loads."""
        graph = ImportGraph.from_sources(
            {
                "pkg/__init__.py": "",
                "pkg/pure.py": "from pkg import helper",
                "pkg/helper.py": "def f():\n    import zmq.asyncio",
                "sub/__init__.py": "from sub.link import Link",
                "sub/link.py": "from zmq import Socket",
                "sub/pure.py": "import msgspec",
                "sub/typed.py": "if TYPE_CHECKING:\n    import zmq",
            }
        )
        modules = ["pkg.pure", "sub.pure", "sub.typed"]
        assert zmq_paths(graph, modules, loading=False) == {"pkg.pure": ["pkg.pure", "pkg.helper"]}
        assert zmq_paths(graph, modules, loading=True) == {
            "pkg.pure": ["pkg.pure", "pkg.helper"],
            "sub.pure": ["sub.pure", "sub", "sub.link"],
            "sub.typed": ["sub.typed", "sub", "sub.link"],
        }

    def test_listed_modules_exist(self) -> None:
        """Every entry of the list names an existing file, so none passes vacuously."""
        names, empty = pure_module_names()
        assert empty == []
        assert "router_core.wire.codec" in names

    def test_pure_modules_import_no_zmq(self) -> None:
        """No pure module imports zmq, itself or through the first-party modules it
        imports."""
        names, _ = pure_module_names()
        assert zmq_paths(source_graph(), names, loading=False) == {}

    def test_importing_pure_modules_loads_no_zmq(self) -> None:
        """Importing a pure module loads no zmq: neither its imports nor the package
        ``__init__`` modules Python runs first import it (a package re-exporting its
        socket-bound names imports them on first use, as ``router_core`` does)."""
        names, _ = pure_module_names()
        assert zmq_paths(source_graph(), names, loading=True) == {}
