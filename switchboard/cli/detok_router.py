"""``switchboard detok-router``: the detokenizer router's flags, and running it.

Its settings flags come from
:class:`~router_core.detokenizer_router.DetokenizerRouterSettings`; the endpoints default
to the run directory's layout for ``--detokenizers`` detokenizers.
"""

from __future__ import annotations

import argparse
from typing import Any

from router_core.detokenizer_router.settings import DetokenizerRouterSettings
from router_core.endpoints import DETOK_ROUTER_STATE_FILE, DetokenizerRouterEndpoints
from switchboard.cli.access import (
    add_audit_log_flag,
    add_control_curve_flags,
    control_curve,
    control_guard,
)
from switchboard.cli.flags import add_settings_flags, loop_settings
from switchboard.cli.support import (
    UsageError,
    add_beacon_flag,
    add_common_flags,
    add_state_file_flag,
    beacon_endpoint,
    checked_endpoint,
    positive_int,
    run_dir,
    serve,
    stack_key,
    state_file,
)

__all__ = ["add_parser", "run", "settings"]


def add_parser(sub: Any) -> None:
    """Add the ``detok-router`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "detok-router", help="run the detokenizer router"
    )
    add_common_flags(parser)
    parser.add_argument(
        "--detokenizers", type=positive_int, default=1, help="how many (M; default 1)"
    )
    parser.add_argument(
        "--inbound-endpoint", help="PULL bound for engine outputs (default: in --run-dir)"
    )
    parser.add_argument(
        "--detokenizer-endpoint",
        action="append",
        help="a detokenizer's endpoint, once per detokenizer (default: the --detokenizers "
        "ones in --run-dir)",
    )
    parser.add_argument(
        "--control-endpoint", help="ROUTER bound for control commands (default: in --run-dir)"
    )
    add_settings_flags(parser, DetokenizerRouterSettings)
    add_state_file_flag(parser, DETOK_ROUTER_STATE_FILE, "the worker-to-detokenizer assignments")
    add_beacon_flag(parser)
    add_audit_log_flag(parser)
    add_control_curve_flags(parser)


def settings(args: argparse.Namespace) -> DetokenizerRouterSettings:
    """The detokenizer router ``args`` describe; :class:`UsageError` for a bad setting."""
    directory = run_dir(args)
    defaults = (
        DetokenizerRouterEndpoints.in_run_dir(directory, args.detokenizers) if directory else None
    )
    remote: bool = args.allow_remote
    targets = args.detokenizer_endpoint or (defaults.detokenizers if defaults else None)
    if not targets:
        raise UsageError("--detokenizer-endpoint is required without --run-dir")
    endpoints = DetokenizerRouterEndpoints(
        inbound=checked_endpoint(
            args.inbound_endpoint,
            defaults.inbound if defaults else None,
            "--inbound-endpoint",
            allow_remote=remote,
        ),
        detokenizers=[
            checked_endpoint(target, None, "--detokenizer-endpoint", allow_remote=remote)
            for target in targets
        ],
        control=checked_endpoint(
            args.control_endpoint,
            defaults.control if defaults else None,
            "--control-endpoint",
            allow_remote=remote,
        ),
    )
    saved = state_file(args, directory, DETOK_ROUTER_STATE_FILE)
    return loop_settings(
        DetokenizerRouterSettings,
        args,
        endpoints=endpoints,
        state_file=saved,
        router_workers=beacon_endpoint(args, directory),
        key=stack_key(args, directory),
        **control_curve(args),
    )


def run(args: argparse.Namespace) -> int:
    """Serve the detokenizer router until SIGTERM; its control socket needs the stack
    key (when it has one) and audits to ``--audit-log`` too."""
    from router_core.detokenizer_router import DetokenizerRouter

    chosen = settings(args)
    guard = control_guard(args, args.run_dir, chosen.key, "detokenizer_router")
    try:
        router = DetokenizerRouter(chosen, control_guard=guard)
        return serve(router, args, role="detokenizer-router")
    finally:
        guard.close()
