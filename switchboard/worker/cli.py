"""``switchboard worker``: its arguments and how they become a running HTTP worker.

:mod:`switchboard.cli` calls :func:`add_parser` and :func:`run`.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from router_core import tracing
from router_core.endpoints import EndpointError, RouterEndpoints, worker_address
from router_core.process import die_with_parent
from router_core.worker_link import WorkerLinkSettings
from switchboard import __version__
from switchboard.cli import UsageError, _positive_float, _positive_int, _run_dir
from switchboard.text import TokenizerLoadError, load_tokenizer
from switchboard.worker.settings import WorkerSettings

__all__ = ["add_parser", "run"]


def _port(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be 1..65535, got {text}")
    return value


def add_parser(sub: Any, add_common: Any) -> None:
    """Add the ``worker`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "worker", help="run one HTTP worker (FastAPI; shares --port with its siblings)"
    )
    add_common(parser)
    parser.add_argument("--worker-id", required=True, help="this worker's id, e.g. w0")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--tokenizer", help="tokenizer.json or model directory (default: built in)")
    parser.add_argument("--model-name", default="switchboard-sim", help="the served model name")
    parser.add_argument(
        "--context-length", type=_positive_int, default=8192, help="prompt + output tokens, max"
    )
    parser.add_argument(
        "--default-max-new-tokens", type=_positive_int, default=128, help="when none is given"
    )
    parser.add_argument(
        "--graceful-timeout",
        type=_positive_float,
        default=30.0,
        help="seconds in-flight requests may take to finish after SIGTERM",
    )
    parser.add_argument(
        "--retry-after", type=int, default=5, help="Retry-After seconds while draining"
    )
    parser.add_argument("--address", help="this worker's return address (default: run dir)")
    parser.add_argument("--requests-endpoint", help="the router's requests PULL")
    parser.add_argument("--workers-endpoint", help="the router's workers PULL")


def _settings(args: argparse.Namespace) -> WorkerSettings:
    run_dir = _run_dir(args)
    if run_dir is None and not (args.address and args.requests_endpoint and args.workers_endpoint):
        raise UsageError(
            "give --run-dir, or all of --address, --requests-endpoint and --workers-endpoint"
        )
    router = RouterEndpoints.in_run_dir(run_dir) if run_dir else None
    try:
        link = WorkerLinkSettings(
            address=args.address or worker_address(run_dir or "", args.worker_id),
            requests_endpoint=args.requests_endpoint or (router.requests if router else ""),
            workers_endpoint=args.workers_endpoint or (router.workers if router else ""),
            hwm=args.hwm,
            allow_remote=args.allow_remote,
        )
        return WorkerSettings(
            worker_id=args.worker_id,
            link=link,
            host=args.host,
            port=args.port,
            model_name=args.model_name,
            context_length=args.context_length,
            default_max_new_tokens=args.default_max_new_tokens,
            retry_after_s=args.retry_after,
            version=__version__,
        )
    except (EndpointError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM; 2 for a bad setting (one line on stderr, no traceback).

    Tracing is set up from the ``OTEL_*`` environment before the app is made (its server
    spans exist only when tracing is on) and flushed when serving ends.
    """
    # The HTTP stack loads only here, so `switchboard <anything else>` does not pay for it.
    from switchboard.worker.app import create_app
    from switchboard.worker.server import listen_socket, run_server

    settings = _settings(args)
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s %(levelname)s worker {settings.worker_id}[%(process)d]: %(message)s",
    )
    try:
        tokenizer = load_tokenizer(args.tokenizer)
    except TokenizerLoadError as exc:
        raise UsageError(str(exc)) from exc
    try:
        sock = listen_socket(settings.host, settings.port)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    tracing.setup("worker", f"worker-{settings.worker_id}")
    try:
        run_server(
            create_app(settings, tokenizer),
            sock,
            log_level=args.log_level,
            graceful_timeout_s=args.graceful_timeout,
        )
    finally:
        tracing.shutdown()
    return 0
