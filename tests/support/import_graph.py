"""The first-party import graph of a source tree, read from parsed source (``ast``).

A module depends on every first-party module it imports when it runs: imports inside
functions count, imports under ``if TYPE_CHECKING:`` do not (type checkers read them,
the interpreter never runs them), and neither do ``importlib.import_module("...")`` calls
(the PEP 562 ``__getattr__`` of ``router_core`` and ``router_core.control`` loads their
socket-bound names that way, on first use, precisely so that importing the package does
not). ``import a.b`` depends on ``a.b``; ``from a import b``
depends on ``a.b`` when that is a module, else on ``a``; relative imports are resolved
against the importing module's package. A C extension (a built ``.so``, or the ``.c``
source ``setup.py`` builds it from) is a module of its own, not its package. Importing a
module also runs its parent packages' ``__init__``; that is not an import edge (a
package's ``__init__`` re-exporting its submodules is not a cycle between them), but
:meth:`ImportGraph.loading_path`, which asks what importing a module loads, follows it.

The house rules (``tests/unit/house_rules/``) read this graph: no cycles between
modules or top-level packages, and no zmq behind a pure module.
"""

from __future__ import annotations

import ast
import importlib.machinery
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

__all__ = [
    "ImportCycle",
    "ImportGraph",
    "module_name",
    "runtime_import_nodes",
    "tier_violations",
]

#: File endings of modules that have no Python source to read.
_EXTENSION_ENDINGS = (*importlib.machinery.EXTENSION_SUFFIXES, ".c")


def module_name(path: str) -> tuple[str, bool] | None:
    """The dotted name of the module at ``path`` (relative, ``/``-separated), and whether
    it is a package; ``None`` for a file that is not a module."""
    parts = PurePosixPath(path).parts
    stem, filename = parts[:-1], parts[-1]
    if filename == "__init__.py":
        return ".".join(stem), True
    if filename.endswith(".py"):
        return ".".join((*stem, filename.removesuffix(".py"))), False
    for ending in _EXTENSION_ENDINGS:
        if filename.endswith(ending):
            return ".".join((*stem, filename.removesuffix(ending))), False
    return None


def _type_checking_only(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and ast.unparse(stmt.test).endswith("TYPE_CHECKING")


def runtime_import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` the interpreter can run: the bodies of
    ``if TYPE_CHECKING:`` are skipped (their ``else`` is not)."""
    pending: deque[ast.AST] = deque([tree])
    while pending:
        node = pending.popleft()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if isinstance(node, ast.stmt) and _type_checking_only(node):
            assert isinstance(node, ast.If)
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))


class ImportCycle(NamedTuple):
    """Modules that import each other: one cycle through them, and the whole group."""

    path: tuple[str, ...]
    modules: frozenset[str]

    def __str__(self) -> str:
        cycle = " -> ".join(self.path)
        others = sorted(self.modules - set(self.path))
        return f"{cycle} (with {', '.join(others)})" if others else cycle


@dataclass
class ImportGraph:
    """Modules, their first-party imports (with the line of the first), and the top-level
    names of the other modules each imports."""

    modules: set[str] = field(default_factory=set)
    edges: dict[str, dict[str, int]] = field(default_factory=dict)
    external: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, sources: Mapping[str, str | None]) -> ImportGraph:
        """The graph of ``sources``: relative path -> source text (``None`` for a module
        with no source, such as a C extension)."""
        named = {path: found for path in sources if (found := module_name(path)) is not None}
        graph = cls(modules={name for name, _ in named.values()})
        for path, (name, is_package) in named.items():
            graph.edges.setdefault(name, {})
            graph.external.setdefault(name, {})
            text = sources[path]
            if text is None:
                continue
            for node in runtime_import_nodes(ast.parse(text, filename=path)):
                for target in graph._targets(node, name, is_package):
                    graph._add(name, target, node.lineno)
        return graph

    @classmethod
    def from_tree(cls, root: Path, packages: Iterable[str]) -> ImportGraph:
        """The graph of every module under ``root``'s directories ``packages``."""
        sources: dict[str, str | None] = {}
        for package in packages:
            for path in sorted((root / package).rglob("*")):
                relative = path.relative_to(root).as_posix()
                if path.is_file() and module_name(relative) is not None:
                    is_python = path.suffix == ".py"
                    sources[relative] = path.read_text(encoding="utf-8") if is_python else None
        return cls.from_sources(sources)

    def _targets(
        self, node: ast.Import | ast.ImportFrom, importer: str, is_package: bool
    ) -> Iterator[str]:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
            return
        base = node.module or ""
        if node.level:
            package = importer.split(".") if is_package else importer.split(".")[:-1]
            anchor = package[: len(package) - (node.level - 1)]
            base = ".".join(filter(None, (*anchor, base)))
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            yield submodule if submodule in self.modules else base

    def _add(self, importer: str, target: str, line: int) -> None:
        found = self._first_party(target)
        if found is None:
            self.external[importer].setdefault(target.partition(".")[0], line)
        elif found != importer:
            self.edges[importer].setdefault(found, line)

    def _first_party(self, target: str) -> str | None:
        """``target``, or its nearest enclosing module, when it is one of ours."""
        parts = target.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in self.modules:
                return candidate
        return None

    def packages(self) -> ImportGraph:
        """This graph with each module folded into its top-level package."""
        folded = ImportGraph(modules={_top(module) for module in self.modules})
        for importer, imported in self.edges.items():
            for target, line in imported.items():
                if _top(target) != _top(importer):
                    folded.edges.setdefault(_top(importer), {}).setdefault(_top(target), line)
        return folded

    def importers_of(self, external: str) -> set[str]:
        """The modules importing the non-first-party top-level module ``external``."""
        return {module for module, imported in self.external.items() if external in imported}

    def cycles(self) -> list[ImportCycle]:
        """Every group of mutually importing modules, each with one shortest cycle through
        its first module; ordered by that module."""
        found = []
        for group in sorted(self._strongly_connected(), key=min):
            if len(group) > 1:
                start = min(group)
                path = (start, *(self._path(start, {start}, group) or []))
                found.append(ImportCycle(path, frozenset(group)))
        return found

    def import_path(self, start: str, goal: Iterable[str]) -> list[str] | None:
        """The shortest chain of imports from ``start`` to a module in ``goal``
        (``[start]`` when it is one), or ``None`` when ``start`` reaches none."""
        return self._chain(start, set(goal), with_parents=False)

    def loading_path(self, start: str, goal: Iterable[str]) -> list[str] | None:
        """Like :meth:`import_path`, but for everything importing ``start`` runs: this
        follows each module to its parent package too, since importing ``a.b.c`` runs
        ``a/__init__`` and ``a/b/__init__`` first."""
        return self._chain(start, set(goal), with_parents=True)

    def _chain(self, start: str, goals: set[str], *, with_parents: bool) -> list[str] | None:
        if start in goals:
            return [start]
        rest = self._path(start, goals, self.modules, with_parents=with_parents)
        return None if rest is None else [start, *rest]

    def _next(self, module: str, with_parents: bool) -> list[str]:
        found = sorted(self.edges.get(module, {}))
        parent = module.rpartition(".")[0]
        if with_parents and parent in self.modules:
            found.insert(0, parent)
        return found

    def _path(
        self, start: str, goals: set[str], within: set[str], *, with_parents: bool = False
    ) -> list[str] | None:
        """The modules after ``start`` on a shortest path to one of ``goals`` that stays
        ``within`` (breadth first; ``start`` may be a goal, for a cycle)."""
        came_from: dict[str, str] = {}
        frontier = deque([start])
        while frontier:
            here = frontier.popleft()
            for there in self._next(here, with_parents):
                if there not in within or there in came_from:
                    continue
                came_from[there] = here
                if there in goals:
                    path = [there]
                    while here != start:
                        path.append(here)
                        here = came_from[here]
                    return path[::-1]
                frontier.append(there)
        return None

    def _strongly_connected(self) -> list[set[str]]:
        """Tarjan's strongly connected components, iteratively (no recursion limit)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        groups: list[set[str]] = []
        for root in sorted(self.modules):
            if root in index:
                continue
            work = [(root, iter(sorted(self.edges.get(root, {}))))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            while work:
                here, successors = work[-1]
                advanced = False
                for there in successors:
                    if there not in index:
                        index[there] = low[there] = len(index)
                        stack.append(there)
                        on_stack.add(there)
                        work.append((there, iter(sorted(self.edges.get(there, {})))))
                        advanced = True
                        break
                    if there in on_stack:
                        low[here] = min(low[here], index[there])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[here])
                if low[here] == index[here]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == here:
                            break
                    groups.append(group)
        return groups


def _top(module: str) -> str:
    return module.partition(".")[0]


def tier_violations(graph: ImportGraph, tiers: Sequence[Sequence[str]]) -> list[str]:
    """Each import of a top-level package by one of its own tier or a lower one (tiers
    listed from the bottom up), and each package ``tiers`` does not place."""
    tier_of = {package: level for level, tier in enumerate(tiers) for package in tier}
    unplaced = {_top(module) for module in graph.modules} - set(tier_of)
    found = [f"{package} is in no tier" for package in sorted(unplaced)]
    for importer, imported in sorted(graph.edges.items()):
        low = _top(importer)
        for target, line in sorted(imported.items()):
            high = _top(target)
            if high != low and tier_of.get(high, -1) >= tier_of.get(low, len(tiers)):
                found.append(f"{low} -> {high}: {importer} imports {target} (line {line})")
    return found
