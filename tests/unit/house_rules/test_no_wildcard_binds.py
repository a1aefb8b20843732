"""House rule: no source names a tcp endpoint that listens on every interface."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import pytest

from tests.unit.house_rules.source_tree import REPO, parse, source_files

#: Endpoints that listen on every interface.
WILDCARD_BIND = re.compile(r"tcp://(\*|0\.0\.0\.0|\[::\]|::)(:|$)")


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
