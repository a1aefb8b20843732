"""``switchboard gateway``: the worker gateway's flags, and running it.

It listens at ``--listen tcp://HOST:PORT`` (control) and the next port (requests), with
the key pair of ``--curve-key-pair`` and the keys of ``--authorised-keys``; the router's
endpoints and the remote workers' return addresses are in ``--run-dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from router_core.endpoints import RouterEndpoints
from router_core.worker_gateway.settings import GatewaySettings
from switchboard.cli.flags import add_settings_flags, loop_settings
from switchboard.cli.support import UsageError, add_common_flags, run_dir, serve

__all__ = ["REMOTE_PREFIX", "add_parser", "run", "settings"]

#: Remote workers' return addresses in the run directory: this, then the worker id.
REMOTE_PREFIX = "remote-"


def add_parser(sub: Any) -> None:
    """Add the ``gateway`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "gateway", help="run the worker gateway (workers on other hosts connect to it)"
    )
    add_common_flags(parser)
    parser.add_argument(
        "--listen",
        required=True,
        help="tcp://HOST:PORT for the remote workers' control connections; requests use "
        "PORT+1 (beyond loopback needs --allow-remote)",
    )
    parser.add_argument(
        "--curve-key-pair",
        required=True,
        type=Path,
        help="this host's .secret file (switchboard keys generate)",
    )
    parser.add_argument(
        "--authorised-keys",
        required=True,
        type=Path,
        help="the worker hosts' public keys, one per line; reread when it changes",
    )
    add_settings_flags(parser, GatewaySettings)


def settings(args: argparse.Namespace) -> GatewaySettings:
    """The gateway ``args`` describe; :class:`UsageError` for a bad setting."""
    directory = run_dir(args)
    if directory is None:
        raise UsageError("switchboard gateway needs --run-dir (the router's endpoints)")
    return loop_settings(
        GatewaySettings,
        args,
        control_listen=args.listen,
        return_prefix=f"ipc://{Path(directory) / REMOTE_PREFIX}",
        router=RouterEndpoints.in_run_dir(directory),
        key_pair_file=args.curve_key_pair,
        authorised_keys_file=args.authorised_keys,
    )


def run(args: argparse.Namespace) -> int:
    """Serve the gateway until SIGTERM; :class:`UsageError` for unusable keys."""
    from router_core.counters import Counters
    from router_core.credentials import KeyFileError
    from router_core.curve import AuthorisedKeys
    from router_core.curve_files import read_key_pair
    from router_core.worker_gateway.gateway import WorkerGateway

    chosen = settings(args)
    try:  # refuse bad key files before anything is bound, in one line
        read_key_pair(chosen.key_pair_file)
        AuthorisedKeys(chosen.authorised_keys_file).load()
    except KeyFileError as exc:
        raise UsageError(str(exc)) from exc
    from switchboard.counter_export import CounterExport

    export = CounterExport(
        "gateway", ("dropped", "rejected", "refused"), known={"refused": ("unknown_key",)}
    )
    counters = Counters()
    gateway = WorkerGateway(chosen, counters=counters, on_second=lambda: export.sync(counters))
    # No tracing of its own: frames pass through unchanged, trace context with them.
    return serve(gateway, args)
