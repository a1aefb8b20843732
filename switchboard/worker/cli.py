"""``switchboard worker``: its flags, and how they become a running HTTP worker.

Its settings flags come from :class:`~switchboard.worker.settings.WorkerSettings`; the
link's endpoints default to the run directory's layout.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router_core import tracing
from router_core.endpoints import EndpointError, RouterEndpoints, worker_address
from router_core.identifiers import check_worker_id
from router_core.process import die_with_parent
from router_core.worker_link import WorkerLinkSettings
from switchboard import __version__
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.cli.support import (
    UsageError,
    add_common_flags,
    configure_logging,
    run_dir,
    stack_key,
    tokenizer_flag,
)
from switchboard.worker.caps import RequestCaps
from switchboard.worker.settings import LEAVE_PORT_SIGNAL, WorkerSettings

if TYPE_CHECKING:
    from switchboard.text import TextCodec
    from switchboard.text.chat_template import ChatTemplate

__all__ = ["GATEWAY_WAIT_S", "add_parser", "chat_template", "run", "settings"]

#: How long a worker with --gateway waits at start for the gateway's answer.
GATEWAY_WAIT_S = 10.0


def add_parser(sub: Any) -> None:
    """Add the ``worker`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "worker", help="run one HTTP worker (FastAPI; shares --port with its siblings)"
    )
    add_common_flags(parser)
    add_settings_flags(parser, WorkerSettings)
    add_settings_flags(parser, RequestCaps)
    parser.add_argument(
        "--accept-any-content-type",
        action="store_true",
        help="read any request body as JSON, whatever its Content-Type (or none) says; "
        "for old clients (default: JSON types only, others get 415)",
    )
    parser.add_argument(
        "--reject-unknown-fields",
        action="store_true",
        help="answer 400 to a body field no endpoint names (default: ignore it and count it "
        "in switchboard_ignored_fields_total)",
    )
    add_settings_flags(parser, WorkerLinkSettings)
    parser.add_argument(
        "--tokenizer", help="tokenizer.json, model directory or .gguf model (default: built in)"
    )
    parser.add_argument("--address", help="this worker's return address (default: run dir)")
    parser.add_argument(
        "--requests-endpoint", help="the router's requests PULL (default: in --run-dir)"
    )
    parser.add_argument(
        "--workers-endpoint", help="the router's workers PULL (default: in --run-dir)"
    )
    parser.add_argument(
        "--gateway",
        help="tcp://HOST:PORT of the control host's worker gateway: this worker runs on a "
        "host of its own and connects only there, with CURVE (needs --curve-key-pair, "
        "--gateway-public-key and --key-file; default: none, the router is on this host)",
    )
    parser.add_argument(
        "--curve-key-pair",
        type=Path,
        help="this host's .secret file (switchboard keys generate; default: none)",
    )
    parser.add_argument(
        "--gateway-public-key", type=Path, help="the control host's .public file (default: none)"
    )
    parser.add_argument(
        "--listen-fd",
        type=int,
        metavar="FD",
        help="serve on this inherited listening socket, shared with the sibling workers "
        "(what switchboard up and a systemd socket unit hand over; a drain then loses no "
        "queued connection); --host/--port still name the address (default: bind "
        "--host:--port with SO_REUSEPORT)",
    )


def _endpoints(args: argparse.Namespace) -> dict[str, Any]:
    """The link's address and endpoints: the run dir's, the flags', or (``--gateway``)
    the gateway's, the address under the prefix the gateway names."""
    if args.gateway:
        return _through_gateway(args)
    directory = run_dir(args)
    if directory is None and not (
        args.address and args.requests_endpoint and args.workers_endpoint
    ):
        raise UsageError(
            "give --run-dir, or all of --address, --requests-endpoint and --workers-endpoint"
        )
    router = RouterEndpoints.in_run_dir(directory) if directory else None
    return {
        "address": args.address or worker_address(directory or "", args.worker_id),
        "requests_endpoint": args.requests_endpoint or (router.requests if router else ""),
        "workers_endpoint": args.workers_endpoint or (router.workers if router else ""),
        "key": stack_key(args, directory),
    }


def _through_gateway(args: argparse.Namespace) -> dict[str, Any]:
    from router_core.credentials import KeyFileError
    from router_core.curve import ClientKeys, read_public_key
    from router_core.curve_files import read_key_pair
    from router_core.worker_gateway import requests_listen_for
    from router_core.worker_gateway.client import GatewayUnavailable, ask_prefix
    from router_core.worker_gateway.frames import address_for

    if not (args.curve_key_pair and args.gateway_public_key and args.key_file):
        raise UsageError("--gateway needs --curve-key-pair, --gateway-public-key and --key-file")
    try:
        keys = ClientKeys(
            read_key_pair(args.curve_key_pair), read_public_key(args.gateway_public_key)
        )
        requests_endpoint = requests_listen_for(args.gateway)
        prefix = ask_prefix(args.gateway, keys, GATEWAY_WAIT_S)
    except (KeyFileError, ValueError, GatewayUnavailable) as exc:
        raise UsageError(str(exc)) from exc
    return {
        "address": address_for(prefix, args.worker_id),
        "requests_endpoint": requests_endpoint,
        "workers_endpoint": args.gateway,
        "key": stack_key(args, None),
        "curve": keys,
    }


def settings(args: argparse.Namespace) -> WorkerSettings:
    """The worker ``args`` describe; :class:`UsageError` for a bad setting. With
    ``--gateway`` this asks the gateway for the return-address prefix (up to 10 s)."""
    try:
        check_worker_id(args.worker_id)
        link = WorkerLinkSettings(
            **_endpoints(args),
            hwm=args.hwm,
            allow_remote=args.allow_remote,
            **settings_values(args, WorkerLinkSettings),
        )
        return WorkerSettings(
            link=link,
            caps=RequestCaps(**settings_values(args, RequestCaps)),
            accept_any_content_type=args.accept_any_content_type,
            reject_unknown_fields=args.reject_unknown_fields,
            version=__version__,
            **settings_values(args, WorkerSettings),
        )
    except (EndpointError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def chat_template(
    worker: WorkerSettings, tokenizer: TextCodec, tokenizer_path: str | None
) -> ChatTemplate | None:
    """The chat template the worker renders chat requests with: ``--chat-template``, else
    the model's own (None when it has none); :class:`UsageError` in one line for a file
    that cannot be used, or a model template that does not compile."""
    from switchboard.text.chat_template_source import ChatTemplateLoadError, load_chat_template

    try:
        return load_chat_template(tokenizer, tokenizer_path, worker.chat_template or None)
    except ChatTemplateLoadError as exc:
        if worker.chat_template:
            raise UsageError(f"--chat-template {exc.source}: {exc.reason}") from exc
        raise UsageError(f"{exc} (give --chat-template FILE to use another)") from exc


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM; :class:`UsageError` for a bad setting.

    Tracing is set up from the ``OTEL_*`` environment before the app is made (its server
    spans exist only when tracing is on) and flushed when serving ends.
    """
    # Until the server handles it (server.run_server), the supervisor's signal that the
    # stack stops must not end a worker that is still starting (its default action).
    signal.signal(LEAVE_PORT_SIGNAL, signal.SIG_IGN)
    # The HTTP stack loads only here, so that --help and a refused setting stay quick.
    from switchboard.worker.app import create_app
    from switchboard.worker.server import listening, run_server

    worker = settings(args)
    configure_logging(args.log_level, who=f"worker {worker.worker_id}".replace("%", "%%"))
    tokenizer = tokenizer_flag(args)
    template = chat_template(worker, tokenizer, args.tokenizer)
    try:
        sock, gate = listening(worker.host, worker.port, args.listen_fd)
    except ValueError as exc:
        raise UsageError(f"--listen-fd {args.listen_fd}: {exc}") from exc
    except OSError as exc:
        if args.listen_fd is not None:
            raise UsageError(f"--listen-fd {args.listen_fd}: {exc.strerror or exc}") from exc
        where = f"{worker.host}:{worker.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    tracing.setup("worker", f"worker-{worker.worker_id}")
    try:
        run_server(
            create_app(worker, tokenizer, chat_template=template),
            sock,
            gate,
            log_level=args.log_level,
            graceful_timeout_s=worker.graceful_timeout_s,
        )
    finally:
        tracing.shutdown()
    return 0
