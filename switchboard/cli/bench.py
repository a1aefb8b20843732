"""``switchboard bench``: run one benchmark suite (``docs/benchmarks.md``)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

__all__ = ["SUITES", "add_parser", "run"]

#: Each suite: the module and the function that runs it (``quick``, ``json_path``).
SUITES = {
    "router": ("switchboard.bench.router", "run_router_bench"),
    "e2e": ("switchboard.bench.e2e", "run_e2e_bench"),
    "observability": ("switchboard.bench.observability", "run_observability_bench"),
    "engine": ("switchboard.bench.engine", "run_engine_bench"),
    "workers": ("switchboard.bench.workers", "run_workers_bench"),
}


def add_parser(sub: Any) -> None:
    """Add the ``bench`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser("bench", help="run a benchmark")
    parser.add_argument("suite", choices=tuple(SUITES), help="which benchmark to run")
    parser.add_argument("--quick", action="store_true", help="short run (under 60 s)")
    parser.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="also write the results to PATH as JSON (default: none, the report only)",
    )
    parser.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="workers: how many simulated workers register (default 1000)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the suite; its exit status."""
    module, function = SUITES[args.suite]
    extra: dict[str, Any] = {}
    if args.count is not None:
        if args.suite != "workers":
            raise SystemExit("switchboard bench: --count is for the workers suite only")
        if args.count < 1:
            raise SystemExit("switchboard bench: --count must be at least 1")
        extra["count"] = args.count
    status: int = getattr(importlib.import_module(module), function)(
        quick=args.quick, json_path=args.json_path, **extra
    )
    return status
