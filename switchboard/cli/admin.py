"""``switchboard admin``: run the admin app (HTTP API and operator console) until SIGTERM.

Tokens come from the environment only (``SWITCHBOARD_ADMIN_OPERATOR_TOKENS``,
``SWITCHBOARD_ADMIN_VIEWER_TOKENS``: ``name:token,...``), never from the command line.
With none on a loopback address one operator token named ``console`` is generated and
the console's URL, token in the fragment, is printed on stdout (never logged); beyond
loopback, no token is a refusal. Beyond loopback or with --allow-remote, a token shorter
than 24 characters is a refusal too; on loopback it is accepted with a warning. ``--audit-log`` (or
``SWITCHBOARD_ADMIN_AUDIT_LOG``) adds a JSON-lines audit file, opened before serving (a
file that cannot be opened is a refusal). The flags' defaults are
:class:`app.settings.AdminSettings`'s.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
from pathlib import Path
from typing import Any

from switchboard.cli.support import (
    UsageError,
    add_common_flags,
    configure_logging,
    non_negative_int,
    port,
    positive_float,
    positive_int,
    run_dir,
    stack_key,
)

__all__ = ["add_parser", "console_url", "run"]

_DESCRIPTION = """\
Serve the admin API and the operator console for one stack's tokenizer router (found
in --run-dir, or at --control-endpoint). Tokens are read from the environment:
SWITCHBOARD_ADMIN_OPERATOR_TOKENS and SWITCHBOARD_ADMIN_VIEWER_TOKENS, each a list of
name:token pairs separated by commas. Without any, on a loopback address, one operator
token is generated and the console URL carrying it is printed."""


def add_parser(sub: Any) -> None:
    """Add the ``admin`` subcommand to ``sub`` (an argparse subparsers action)."""
    from app.settings import AdminSettings

    fields = AdminSettings.model_fields
    parser: argparse.ArgumentParser = sub.add_parser(
        "admin",
        help="run the admin app (HTTP API and operator console)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_flags(parser)
    parser.add_argument(
        "--control-endpoint", help="the tokenizer router's control endpoint (default: in --run-dir)"
    )
    parser.add_argument(
        "--detok-control-endpoint",
        help="the detokenizer router's control endpoint, read by /metrics (default: in "
        "--run-dir, else none)",
    )
    parser.add_argument(
        "--control-curve-key-pair",
        type=Path,
        metavar="FILE",
        help="this app's .secret file, for a tcp:// control endpoint (default: "
        "SWITCHBOARD_ADMIN_CONTROL_CURVE_KEY_PAIR, else none)",
    )
    parser.add_argument(
        "--control-server-public-key",
        type=Path,
        metavar="FILE",
        help="the routers' .public file, for a tcp:// control endpoint (default: "
        "SWITCHBOARD_ADMIN_CONTROL_SERVER_PUBLIC_KEY, else none)",
    )
    parser.add_argument(
        "--host", default=fields["host"].default, help="address to listen on (default %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=port,
        default=fields["port"].default,
        help="port to listen on (default %(default)s)",
    )
    parser.add_argument(
        "--audit-log",
        type=Path,
        metavar="PATH",
        help="also write every audit record to PATH, one JSON object per line (appended; "
        "created with mode 0600; default: SWITCHBOARD_ADMIN_AUDIT_LOG, else the log only)",
    )
    parser.add_argument(
        "--poll-interval-s",
        "--poll-interval",
        dest="poll_interval_s",
        type=positive_float,
        default=fields["poll_interval_s"].default,
        metavar="S",
        help="seconds between the event stream's reads of the router (default %(default)s)",
    )
    for name, kind in _HTTP_LIMIT_FLAGS.items():
        # Unset by default, so that SWITCHBOARD_ADMIN_<NAME> still applies.
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            metavar="S" if name.endswith("_s") else None,
            help=f"{fields[name].description} (default {fields[name].default!r})".replace(
                "%", "%%"
            ),
        )


#: The HTTP limit settings (bodies and event streams included) offered as flags, and their
#: parsers; the defaults and the help are AdminSettings'.
_HTTP_LIMIT_FLAGS: dict[str, Any] = {
    "max_header_bytes": positive_int,
    "header_timeout_s": positive_float,
    "body_timeout_s": positive_float,
    "keep_alive_s": positive_float,
    "max_connections": positive_int,
    "allowed_hosts": str,
    "max_body_bytes": non_negative_int,
    "max_subscribers": positive_int,
}
#: How a refusal of a Host names the setting that allows more.
ALLOWED_HOSTS_SETTING = (
    "--allowed-hosts or SWITCHBOARD_ADMIN_ALLOWED_HOSTS (switchboard up: allowed_hosts)"
)


def console_url(host: str, port: int, token: str | None = None) -> str:
    """``http://host:port/``, with ``#token=<token>`` when given (browsers never send the
    fragment to a server, so the token is not in any access log)."""
    bare = host.strip("[]")
    try:
        shown = f"[{bare}]" if ipaddress.ip_address(bare).version == 6 else bare
    except ValueError:
        shown = bare
    return f"http://{shown}:{port}/" + (f"#token={token}" if token else "")


def _metrics_dir() -> Path | None:
    """``PROMETHEUS_MULTIPROC_DIR`` (``switchboard up`` sets it), or None."""
    found = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(found) if found else None


def _settings(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from app.settings import AdminSettings
    from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints
    from router_core.version import package_version

    directory = run_dir(args)
    endpoint = args.control_endpoint
    if endpoint is None:
        if directory is None:
            raise UsageError("give --run-dir or --control-endpoint")
        endpoint = RouterEndpoints.in_run_dir(directory).control
    detok_endpoint = args.detok_control_endpoint
    if detok_endpoint is None and directory is not None:
        detok_endpoint = DetokenizerRouterEndpoints.in_run_dir(directory, 1).control
    # Unset, the environment's SWITCHBOARD_ADMIN_AUDIT_LOG (if any) applies.
    given: dict[str, Any] = {"audit_log": args.audit_log} if args.audit_log is not None else {}
    # The stack key of --key-file or the run dir, made there if this process is the first
    # of the stack to start (else SWITCHBOARD_ADMIN_CONTROL_KEY, if set).
    key = stack_key(args, directory)
    if key is not None:
        given["control_key"] = key
    for name in (*_HTTP_LIMIT_FLAGS, "control_curve_key_pair", "control_server_public_key"):
        if getattr(args, name) is not None:
            given[name] = getattr(args, name)
    try:
        return AdminSettings(
            **given,
            control_endpoint=endpoint,
            detok_control_endpoint=detok_endpoint,
            metrics_dir=_metrics_dir(),
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            poll_interval_s=args.poll_interval_s,
            version=package_version(),
        )
    except ValidationError as exc:
        problems = []
        for detail in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in detail["loc"])
            message = detail["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {message}" if where else message)
        raise UsageError("; ".join(problems).replace("\n", " ")) from exc


def run(args: argparse.Namespace) -> int:
    """Serve the admin app until SIGTERM (exit 0); a refused setting is a
    :class:`UsageError` (one line, exit 2)."""
    from app.audit import audit_log
    from app.server import listen_socket
    from app.tokens import (
        GENERATED_TOKEN_NAME,
        MIN_REMOTE_TOKEN_CHARS,
        NamedToken,
        TokenTable,
        generate_token,
        short_tokens,
    )

    settings = _settings(args)
    try:
        sock = listen_socket(settings.host, settings.port)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    configure_logging(args.log_level)
    audit = audit_log(settings.audit_log)
    try:
        audit.open()
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot open the audit log {settings.audit_log}: {exc.strerror or exc}"
        ) from exc
    short = short_tokens(settings.tokens.operators) + short_tokens(settings.tokens.viewers)
    if short:
        logging.getLogger("switchboard.admin").warning(
            "admin tokens shorter than %d characters (%s): accepted on loopback only",
            MIN_REMOTE_TOKEN_CHARS,
            ", ".join(short),
        )
    if settings.tokens.empty:
        token = generate_token()
        settings = settings.with_tokens(
            TokenTable(operators=(NamedToken(GENERATED_TOKEN_NAME, token),))
        )
        # stdout, not the logger: the token must not reach a log file.
        print(
            f"switchboard admin: console {console_url(settings.host, settings.port, token)}",
            flush=True,
        )
    tokens = settings.tokens
    logging.getLogger("switchboard.admin").info(
        "admin app on %s for the router at %s (%d operator, %d viewer tokens)",
        console_url(settings.host, settings.port),
        settings.control_endpoint,
        len(tokens.operators),
        len(tokens.viewers),
    )
    if args.parent_pid is not None:
        from router_core.process import die_with_parent

        die_with_parent(args.parent_pid)
    from app.main import create_app
    from app.server import run_server
    from httpkit.hosts import AllowedHosts
    from router_core import tracing

    tracing.setup("admin", "admin")
    try:
        run_server(
            create_app(settings, audit_log=audit),
            sock,
            log_level=args.log_level,
            limits=settings.http_limits,
            hosts=AllowedHosts.from_setting(
                settings.allowed_hosts, bind_host=settings.host, setting=ALLOWED_HOSTS_SETTING
            ),
        )
    finally:
        tracing.shutdown()
    return 0
