"""``switchboard router``: the tokenizer router's flags, and running it.

Its settings flags come from :class:`~router_core.tokenizer_router.RouterSettings`; the
endpoints default to the run directory's layout, each overridable.
"""

from __future__ import annotations

import argparse
from typing import Any

from router_core.endpoints import ROUTER_STATE_FILE, RouterEndpoints
from router_core.tokenizer_router.settings import RouterSettings
from switchboard.cli.access import (
    add_audit_log_flag,
    add_control_curve_flags,
    control_curve,
    control_guard,
)
from switchboard.cli.flags import add_settings_flags, loop_settings
from switchboard.cli.support import (
    add_common_flags,
    add_state_file_flag,
    checked_endpoint,
    run_dir,
    serve,
    stack_key,
    state_file,
)

__all__ = ["ENDPOINTS", "add_parser", "run", "settings"]

#: Each endpoint field of :class:`RouterEndpoints` and its flag's help.
ENDPOINTS = {
    "requests": "PULL the router binds for worker requests",
    "workers": "PULL the router binds for worker registration and heartbeats",
    "engine": "the engine's input endpoint (the router connects)",
    "engine_events": "PULL the router binds for engine acks and load",
    "outputs": "PULL the router binds for outputs routed back to workers",
    "control": "ROUTER the router binds for control commands",
}


def _flag(field: str) -> str:
    return f"--{field.replace('_', '-')}-endpoint"


def add_parser(sub: Any) -> None:
    """Add the ``router`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser("router", help="run the tokenizer router")
    add_common_flags(parser)
    for field, help_text in ENDPOINTS.items():
        parser.add_argument(_flag(field), help=f"{help_text} (default: in --run-dir)")
    add_settings_flags(parser, RouterSettings)
    add_state_file_flag(
        parser, ROUTER_STATE_FILE, "the pause state, drain marks and operation counter"
    )
    add_audit_log_flag(parser)
    add_control_curve_flags(parser)


def settings(args: argparse.Namespace) -> RouterSettings:
    """The router ``args`` describe; :class:`UsageError` for a bad setting."""
    directory = run_dir(args)
    defaults = RouterEndpoints.in_run_dir(directory) if directory else None
    remote: bool = args.allow_remote
    endpoints = RouterEndpoints(
        **{
            field: checked_endpoint(
                getattr(args, f"{field}_endpoint"),
                getattr(defaults, field) if defaults else None,
                _flag(field),
                allow_remote=remote,
            )
            for field in ENDPOINTS
        }
    )
    saved = state_file(args, directory, ROUTER_STATE_FILE)
    key = stack_key(args, directory)
    return loop_settings(
        RouterSettings,
        args,
        endpoints=endpoints,
        state_file=saved,
        key=key,
        **control_curve(args),
    )


def run(args: argparse.Namespace) -> int:
    """Serve the tokenizer router until SIGTERM; its control socket needs the stack key
    (when it has one) and audits to ``--audit-log`` too."""
    from router_core.tokenizer_router import TokenizerRouter

    chosen = settings(args)
    guard = control_guard(args, args.run_dir, chosen.key, "tokenizer_router")
    try:
        return serve(TokenizerRouter(chosen, control_guard=guard), args, role="tokenizer-router")
    finally:
        guard.close()
