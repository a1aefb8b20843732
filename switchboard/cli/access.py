"""Who may talk to a process's control socket, and what it writes down.

The servers' side: :func:`control_guard` builds a router's
:class:`~router_core.control.guard.ControlGuard` from its key (resolved by
:func:`switchboard.cli.support.stack_key`), the key file a refused client should read
(:func:`key_file_of`) and its audit log (``--audit-log``, :func:`audit_log`). The
clients' side: :func:`client_key` reads the key of a running stack (never creating one).
Importing this module costs the standard library only.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from switchboard.cli.support import UsageError

if TYPE_CHECKING:
    from router_core.audit import AuditLog
    from router_core.control.guard import ControlGuard

__all__ = [
    "AUDIT_LOGGER",
    "add_audit_log_flag",
    "add_control_curve_flags",
    "audit_log",
    "client_key",
    "control_curve",
    "control_guard",
    "key_file_of",
]

#: The logger every audit line goes to, in the routers as in the admin app.
AUDIT_LOGGER: Final = "switchboard.audit"


def key_file_of(args: argparse.Namespace, directory: str | None) -> str:
    """Where the stack key is read: ``--key-file``, else ``stack.key`` in the run
    directory, else ``""`` (none)."""
    from router_core.credentials import KEY_FILE

    given: str | None = args.key_file
    if given is None and directory:
        given = os.path.join(directory, KEY_FILE)
    return given or ""


def client_key(args: argparse.Namespace, directory: str | None) -> str | None:
    """The stack key a client of a running stack sends: read from ``--key-file`` or the
    run directory's ``stack.key`` (never created: the stack made it), None without
    either; :class:`UsageError` for a key file that is missing or cannot be used."""
    from router_core.credentials import KeyFileError, read_key

    where = key_file_of(args, directory)
    if not where:
        return None
    try:
        return read_key(Path(where))
    except KeyFileError as exc:
        raise UsageError(str(exc)) from None


def add_audit_log_flag(parser: argparse.ArgumentParser) -> None:
    """``--audit-log``: a JSON-lines file for the control socket's audit records."""
    parser.add_argument(
        "--audit-log",
        metavar="PATH",
        help="also append each control-socket audit record (every mutation and every "
        "refused request) to this JSON-lines file, created 0600 (default: the log only)",
    )


def audit_log(args: argparse.Namespace) -> AuditLog:
    """The audit log ``--audit-log`` asks for, its file open now; :class:`UsageError`
    when the file cannot be opened for appending."""
    from router_core.audit import AuditLog

    given: str | None = args.audit_log
    log = AuditLog(logging.getLogger(AUDIT_LOGGER), Path(given) if given else None)
    try:
        log.open()
    except OSError as exc:
        raise UsageError(f"--audit-log {given}: {exc.strerror or exc}") from None
    return log


def control_guard(
    args: argparse.Namespace, directory: str | None, key: str | None, role: str
) -> ControlGuard:
    """A router's control guard: ``key`` (its stack key, None: none), the key file named
    in a refusal, the audit log of ``--audit-log`` (opened now), and ``role``."""
    from router_core.control.guard import ControlGuard

    return ControlGuard(
        key=key, key_file=key_file_of(args, directory), audit=audit_log(args), role=role
    )


def add_control_curve_flags(parser: argparse.ArgumentParser) -> None:
    """``--control-key-pair`` and ``--control-authorised-keys``: CURVE on a router's
    control socket (:mod:`router_core.control.curve_socket`)."""
    parser.add_argument(
        "--control-key-pair",
        type=Path,
        metavar="FILE",
        help="this router's .secret file (switchboard keys generate): CURVE on the control "
        "socket, which a tcp:// --control-endpoint requires (default: none)",
    )
    parser.add_argument(
        "--control-authorised-keys",
        type=Path,
        metavar="FILE",
        help="the client public keys let in to a CURVE control socket, one per line, "
        "reread when it changes (default: none)",
    )


def control_curve(args: argparse.Namespace) -> dict[str, Any]:
    """The control socket's CURVE settings from the flags; :class:`UsageError` for a key
    pair file that cannot be used."""
    # Imported here: every switchboard command builds the parsers that use these flags.
    from router_core.credentials import KeyFileError
    from router_core.curve_files import read_key_pair

    if args.control_key_pair is None:
        authorised = args.control_authorised_keys
        return {"control_authorised_keys": None if authorised is None else str(authorised)}
    try:
        pair = read_key_pair(args.control_key_pair)
    except KeyFileError as exc:
        raise UsageError(f"--control-key-pair: {exc}") from exc
    authorised = args.control_authorised_keys
    return {
        "control_key_pair": pair,
        "control_authorised_keys": None if authorised is None else str(authorised),
    }
