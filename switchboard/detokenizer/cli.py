"""``switchboard detokenizer``: its flags, and how they become a running :class:`Detokenizer`.

Its settings flags come from :class:`~switchboard.detokenizer.settings.DetokenizerSettings`;
everything specific to the detokenizer's command line lives here.
"""

from __future__ import annotations

import argparse
from typing import Any

from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints
from switchboard.cli.flags import add_settings_flags, loop_settings
from switchboard.cli.support import (
    UsageError,
    add_beacon_flag,
    add_common_flags,
    add_outputs_via_flag,
    beacon_endpoint,
    checked_endpoint,
    positive_int,
    run_dir,
    serve,
    stack_key,
    tokenizer_flag,
)
from switchboard.detokenizer.process import Detokenizer
from switchboard.detokenizer.settings import DetokenizerSettings

__all__ = ["add_parser", "build", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``detokenizer`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "detokenizer", help="run one detokenizer (token ids -> text)"
    )
    add_common_flags(parser)
    parser.add_argument("--count", type=positive_int, default=1, help="how many (M; default 1)")
    parser.add_argument("--endpoint", help="PULL bound for token batches (default: run dir)")
    add_outputs_via_flag(
        parser, "direct: send text straight to the workers; router: through the tokenizer router"
    )
    parser.add_argument("--outputs-endpoint", help="the router's outputs (default: run dir)")
    add_beacon_flag(parser)
    parser.add_argument(
        "--tokenizer", help="tokenizer.json, model directory or .gguf model (default: built in)"
    )
    add_settings_flags(parser, DetokenizerSettings)


def build(args: argparse.Namespace) -> Detokenizer:
    """The detokenizer ``args`` describe; :class:`UsageError` for a bad setting."""
    directory = run_dir(args)
    remote: bool = args.allow_remote
    if args.index >= args.count:
        raise UsageError(f"--index {args.index} must be below --count {args.count}")
    default = None
    if directory:
        layout = DetokenizerRouterEndpoints.in_run_dir(directory, args.count)
        default = layout.detokenizers[args.index]
    endpoint = checked_endpoint(args.endpoint, default, "--endpoint", allow_remote=remote)
    router_outputs = None
    if args.outputs_via == "router":
        outputs = RouterEndpoints.in_run_dir(directory).outputs if directory else None
        router_outputs = checked_endpoint(
            args.outputs_endpoint, outputs, "--outputs-endpoint", allow_remote=remote
        )
    tokenizer = tokenizer_flag(args)
    settings = loop_settings(
        DetokenizerSettings,
        args,
        endpoint=endpoint,
        outputs_to="router" if args.outputs_via == "router" else "workers",
        router_outputs=router_outputs,
        router_workers=beacon_endpoint(args, directory),
        key=stack_key(args, directory),
        tokenizer=tokenizer,
    )
    return Detokenizer(settings)


def run(args: argparse.Namespace) -> int:
    """Serve the detokenizer until SIGTERM (it sets up its own tracing)."""
    return serve(build(args), args)
