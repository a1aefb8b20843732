"""``switchboard engine``: the built-in engine's flags, and running it.

Its scheduler flags come from :class:`~switchboard.engine.scheduler.SchedulerConfig`;
the link's endpoints default to the run directory's layout, each overridable.
"""

from __future__ import annotations

import argparse
from typing import Any

from router_core.engine_link import EngineEndpoints
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.cli.support import (
    UsageError,
    add_common_flags,
    add_outputs_via_flag,
    checked_endpoint,
    positive_float,
    run_dir,
    serve,
    stack_key,
    tokenizer_flag,
)
from switchboard.engine.engine import DEFAULT_LOAD_INTERVAL_S
from switchboard.engine.scheduler import SchedulerConfig

__all__ = ["add_parser", "run"]

#: The link's endpoint fields, each a ``--<field>-endpoint`` flag.
_ENDPOINTS = {
    "inbound": "PULL bound for requests",
    "events": "the router's engine-events PULL",
    "outputs": "where batched outputs go",
}


def add_parser(sub: Any) -> None:
    """Add the ``engine`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "engine", help="run the built-in simulated engine"
    )
    add_common_flags(parser)
    for field, help_text in _ENDPOINTS.items():
        parser.add_argument(f"--{field}-endpoint", help=f"{help_text} (default: in --run-dir)")
    add_outputs_via_flag(
        parser,
        "where the default outputs endpoint is: direct, the detokenizer router's inbound; "
        "router, the tokenizer router's outputs",
    )
    add_settings_flags(parser, SchedulerConfig)
    parser.add_argument("--tokenizer", help="tokenizer.json or model directory (default: built in)")
    parser.add_argument(
        "--load-interval-s",
        "--load-interval",
        dest="load_interval_s",
        type=positive_float,
        default=DEFAULT_LOAD_INTERVAL_S,
        metavar="S",
        help="seconds between load reports (default %(default)s)",
    )


def _endpoints(args: argparse.Namespace, directory: str | None) -> EngineEndpoints:
    defaults = EngineEndpoints.in_run_dir(directory, args.outputs_via) if directory else None
    return EngineEndpoints(
        **{
            field: checked_endpoint(
                getattr(args, f"{field}_endpoint"),
                getattr(defaults, field) if defaults else None,
                f"--{field}-endpoint",
                allow_remote=args.allow_remote,
            )
            for field in _ENDPOINTS
        }
    )


def run(args: argparse.Namespace) -> int:
    """Serve the built-in engine until SIGTERM; :class:`UsageError` for a bad setting."""
    from router_core.engine_link import EngineLink
    from switchboard.engine import Scheduler, text_token_pool
    from switchboard.engine.engine import BuiltinEngine

    directory = run_dir(args)
    endpoints = _endpoints(args, directory)
    key = stack_key(args, directory)
    tokenizer = tokenizer_flag(args)
    try:
        pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
        config = SchedulerConfig(
            token_pool=pool,
            eos_token_id=tokenizer.eos_token_id,
            **settings_values(args, SchedulerConfig),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    link = EngineLink(
        endpoints,
        hwm=args.hwm,
        backlog_limit=args.backlog,
        allow_remote=args.allow_remote,
        key=key,
    )
    scheduler = Scheduler(config, decode=tokenizer.decode)
    return serve(BuiltinEngine(link, scheduler, load_interval_s=args.load_interval_s), args)
