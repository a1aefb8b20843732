"""The source tree the house rules read: where the repository is, which packages are its
source, each file parsed (``ast``), and the import graph of the top-level packages.

Each rule scans parsed source, so a comment or docstring that names a forbidden thing
does not trip it, and each scanner is first shown to catch a violation it is fed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.support.import_graph import ImportGraph

__all__ = [
    "GRAPH_ROOTS",
    "PACKAGE_TIERS",
    "REPO",
    "SOURCE_ROOTS",
    "parse",
    "source_files",
    "source_graph",
]

REPO = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = ("router_core", "httpkit", "app", "switchboard")
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


def source_files(roots: tuple[str, ...] = SOURCE_ROOTS) -> list[Path]:
    """Every Python file under ``roots``."""
    return sorted(path for root in roots for path in (REPO / root).rglob("*.py"))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache
def source_graph() -> ImportGraph:
    """The import graph of every module under :data:`GRAPH_ROOTS`, read once."""
    return ImportGraph.from_tree(REPO, GRAPH_ROOTS)
