"""House rule: router_core knows no HTTP, and HTTP code knows no zmq (they meet in
router_core clients); router_core keeps the metrics and tracing libraries out."""

from __future__ import annotations

import ast

from tests.support.import_graph import runtime_import_nodes
from tests.unit.house_rules.source_tree import REPO, parse, source_files

#: Code that speaks HTTP, and so must reach the router only through router_core clients.
HTTP_ROOTS = ("httpkit", "app", "switchboard/worker")
#: Modules that make a package an HTTP package.
HTTP_MODULES = frozenset({"fastapi", "starlette", "uvicorn", "httpx", "h11", "httptools"})


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
