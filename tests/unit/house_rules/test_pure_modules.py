"""House rule: the pure modules (decoded messages in; data, decisions or frames out) load
no zmq, through their own imports or through the package ``__init__`` modules Python runs
first."""

from __future__ import annotations

from tests.support.import_graph import ImportGraph, module_name
from tests.unit.house_rules.source_tree import REPO, source_graph

#: Pure logic (decoded messages in; data, decisions or frames out): importing one of
#: these loads no zmq. Globs relative to the repository, each naming at least one file.
PURE_MODULES = (
    "router_core/wire/*.py",
    "router_core/registry.py",
    "router_core/barrier.py",
    "router_core/detokenizer_router/picker.py",
    "router_core/detokenizer_router/core.py",
    "router_core/detokenizer_router/effects.py",
    "router_core/histogram.py",
    "router_core/counters.py",
    "router_core/traffic.py",
    "router_core/lazy.py",
    "router_core/limits.py",
    "router_core/settings_fields.py",
    "router_core/run_dir.py",
    # The routers' control commands and replies (the clients and server are not pure).
    "router_core/control/commands.py",
    "router_core/control/command_args.py",
    "router_core/control/command_model.py",
    "router_core/control/table.py",
    "router_core/control/guard.py",
    "router_core/control/protocol.py",
    "router_core/control/replies.py",
    "router_core/worker_link/session.py",
    # The worker link's core: inbound dispatch, the timer and what sends count.
    "router_core/worker_link/dispatch.py",
    "router_core/worker_link/effects.py",
    "router_core/worker_link/errors.py",
    "router_core/worker_link/outcomes.py",
    "router_core/worker_link/streams.py",
    "router_core/worker_link/timer.py",
    "router_core/worker_link/idle.py",
    "router_core/beacon.py",
    # The worker gateway's frames, decisions and settings (its shell is not pure).
    "router_core/worker_gateway/frames.py",
    "router_core/worker_gateway/core.py",
    "router_core/worker_gateway/settings.py",
    "switchboard/supervisor/layout.py",
    "switchboard/supervisor/stop_budget.py",
    # The tokenizer router's core: handlers take decoded messages and return effects.
    "router_core/tokenizer_router/backward.py",
    "router_core/tokenizer_router/commands.py",
    "router_core/tokenizer_router/core.py",
    "router_core/tokenizer_router/dispatch.py",
    "router_core/tokenizer_router/effects.py",
    "router_core/tokenizer_router/engine_events.py",
    "router_core/tokenizer_router/engine_requests.py",
    "router_core/tokenizer_router/weight_updates.py",
    "router_core/tokenizer_router/pause.py",
    "router_core/tokenizer_router/registration.py",
    "router_core/tokenizer_router/view.py",
    "router_core/tokenizer_router/upstream.py",
    "router_core/tokenizer_router/durable.py",
)


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
