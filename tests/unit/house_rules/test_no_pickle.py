"""House rule: no source module pickles, directly or through pyzmq (the bench's baseline
aside)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.house_rules.source_tree import REPO, parse, source_files

#: The one place that pickles on purpose: the seed-style baseline the router bench beats.
PICKLE_ALLOWED = frozenset({Path("switchboard/bench/naive.py")})
#: Modules that deserialize by running code; pickle over ZeroMQ is how serving stacks got RCEs.
PICKLE_MODULES = frozenset({"pickle", "_pickle", "cPickle", "cloudpickle", "dill"})
#: pyzmq's convenience methods that pickle implicitly.
PICKLE_SOCKET_METHODS = frozenset({"send_pyobj", "recv_pyobj"})
#: Importers that take a module name as a string.
DYNAMIC_IMPORTERS = frozenset({"__import__", "import_module"})


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
