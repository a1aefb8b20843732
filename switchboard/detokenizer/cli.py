"""``switchboard detokenizer``: its arguments and how they become a :class:`Detokenizer`.

:mod:`switchboard.cli` calls :func:`add_parser` and :func:`build`; everything specific
to the detokenizer lives here.
"""

from __future__ import annotations

import argparse
from typing import Any

from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints
from switchboard.cli import (
    UsageError,
    _endpoint,
    _positive_float,
    _positive_int,
    _run_dir,
)
from switchboard.detokenizer.process import Detokenizer
from switchboard.detokenizer.settings import DetokenizerSettings
from switchboard.text import TokenizerLoadError, load_tokenizer

__all__ = ["add_parser", "build"]


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_parser(sub: Any, add_common: Any) -> None:
    """Add the ``detokenizer`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "detokenizer", help="run one detokenizer (token ids -> text)"
    )
    add_common(parser)
    parser.add_argument("--index", type=_non_negative_int, default=0, help="this one's index j")
    parser.add_argument("--count", type=_positive_int, default=1, help="how many (M)")
    parser.add_argument("--endpoint", help="PULL bound for token batches (default: run dir)")
    parser.add_argument(
        "--outputs-via",
        choices=("workers", "router"),
        default="workers",
        help="send text straight to the workers, or through the tokenizer router",
    )
    parser.add_argument("--outputs-endpoint", help="the router's outputs (default: run dir)")
    parser.add_argument("--tokenizer", help="tokenizer.json or model directory (default: built in)")
    parser.add_argument(
        "--holdback-chars",
        type=_non_negative_int,
        default=32,
        help="characters held back per request so a stop string spanning steps is trimmed",
    )
    parser.add_argument(
        "--state-ttl", type=_positive_float, default=600.0, help="forget idle requests (s)"
    )
    parser.add_argument(
        "--max-states", type=_positive_int, default=100_000, help="open requests kept at most"
    )


def build(args: argparse.Namespace) -> Detokenizer:
    """The detokenizer ``args`` describe; :class:`UsageError` for a bad setting."""
    run_dir = _run_dir(args)
    remote = args.allow_remote
    if args.index >= args.count:
        raise UsageError(f"--index {args.index} must be below --count {args.count}")
    default = None
    if run_dir:
        default = DetokenizerRouterEndpoints.in_run_dir(run_dir, args.count).detokenizers[
            args.index
        ]
    if args.endpoint is None and default is None:
        raise UsageError("--endpoint is required without --run-dir")
    endpoint = _endpoint(args.endpoint, default, "", remote)
    router_outputs = None
    if args.outputs_via == "router":
        outputs = RouterEndpoints.in_run_dir(run_dir).outputs if run_dir else None
        router_outputs = _endpoint(args.outputs_endpoint, outputs, "outputs", remote)
    try:
        tokenizer = load_tokenizer(args.tokenizer)
        settings = DetokenizerSettings(
            endpoint=endpoint,
            index=args.index,
            outputs_to=args.outputs_via,
            router_outputs=router_outputs,
            tokenizer=tokenizer,
            hwm=args.hwm,
            backlog_limit=args.backlog,
            allow_remote=remote,
            holdback_chars=args.holdback_chars,
            state_ttl_s=args.state_ttl,
            max_states=args.max_states,
        )
    except (TokenizerLoadError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    return Detokenizer(settings)
