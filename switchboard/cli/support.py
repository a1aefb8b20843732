"""What every ``switchboard`` subcommand shares: errors, validators, common flags, logging.

A subcommand module builds its parser with these and raises :class:`UsageError` for a
bad setting found after parsing; :func:`switchboard.cli.main` prints it as one line,
``switchboard <command>: <message>``, and exits 2. A bad flag value is caught by the
validators here while parsing, also as one line and exit 2
(:class:`~switchboard.cli.parsing.OneLineParser`).
Importing this module costs the standard library only (``switchboard status`` loads it
too); what a helper needs of ``router_core`` is imported when it is called.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING, TypeVar

from switchboard.argtypes import finite_float
from switchboard.cli.parsing import OneLineParser

if TYPE_CHECKING:
    from router_core.endpoints import OutputsVia
    from router_core.process import Service
    from switchboard.text import TextCodec

__all__ = [
    "OneLineParser",
    "UsageError",
    "add_common_flags",
    "add_outputs_via_flag",
    "checked_endpoint",
    "configure_logging",
    "log_format",
    "log_level",
    "non_negative_float",
    "non_negative_int",
    "outputs_via",
    "port",
    "positive_float",
    "positive_int",
    "run_dir",
    "seconds",
    "serve",
    "stack_key",
    "tokenizer_flag",
]


#: A parsed flag value: a float or an int.
Number = TypeVar("Number", float, int)


class UsageError(Exception):
    """A bad command line or setting: reported in one line, exit status 2."""


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _above_zero(value: Number, text: str, *, or_zero: bool) -> Number:
    """``value`` if it is > 0 (or, ``or_zero``, >= 0); else the refusal naming ``text``."""
    if value < 0 or (value == 0 and not or_zero):
        raise argparse.ArgumentTypeError(f"must be {'>=' if or_zero else '>'} 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _above_zero(finite_float(text), text, or_zero=False)


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return _above_zero(finite_float(text), text, or_zero=True)


def seconds(text: str) -> float:
    """A duration: a finite number of seconds > 0."""
    return _above_zero(finite_float(text, expected="seconds"), text, or_zero=False)


def positive_int(text: str) -> int:
    """A whole number > 0."""
    return _above_zero(_whole(text), text, or_zero=False)


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _above_zero(_whole(text), text, or_zero=True)


def port(text: str) -> int:
    """A TCP port, 1..65535."""
    value = _whole(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be 1..65535, got {text}")
    return value


def log_level(text: str) -> str:
    """A :mod:`logging` level name, in any case (kept as given)."""
    if text.upper() not in logging.getLevelNamesMapping():
        raise argparse.ArgumentTypeError(f"not a logging level: {text}")
    return text


def outputs_via(text: str) -> OutputsVia:
    """``direct`` or ``router``; the old ``detokenizers`` and ``workers`` mean ``direct``."""
    from router_core.endpoints import parse_outputs_via

    try:
        return parse_outputs_via(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every process has: run dir, queue limits, remote opt-in, log level, parent."""
    from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM

    parser.add_argument(
        "--run-dir",
        help="the stack's run directory, where the ipc:// endpoints are by default (default: "
        "none; every endpoint flag is then required)",
    )
    parser.add_argument(
        "--key-file",
        help="the stack key every peer presents (default: stack.key in --run-dir, created "
        "if missing; none without a run dir)",
    )
    parser.add_argument(
        "--hwm",
        type=positive_int,
        default=DEFAULT_HWM,
        help="socket high-water mark (default %(default)s)",
    )
    parser.add_argument(
        "--backlog",
        type=positive_int,
        default=DEFAULT_BACKLOG,
        help="messages queued per destination beyond the HWM before dropping (default %(default)s)",
    )
    parser.add_argument(
        "--allow-remote", action="store_true", help="permit tcp:// endpoints beyond loopback"
    )
    parser.add_argument(
        "--log-level", type=log_level, default="INFO", help="logging level (default INFO)"
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        help="exit when this process (the supervisor) dies (default: none, run on its own)",
    )


def add_outputs_via_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--outputs-via direct|router`` (default direct); ``help_text`` says what each means."""
    from router_core.endpoints import OUTPUTS_VIA_CHOICES

    parser.add_argument(
        "--outputs-via",
        type=outputs_via,
        default="direct",
        metavar="{" + ",".join(OUTPUTS_VIA_CHOICES) + "}",
        help=f"{help_text} (default direct; the old values detokenizers and workers mean direct)",
    )


def run_dir(args: argparse.Namespace) -> str | None:
    """``--run-dir`` if given; :class:`UsageError` unless it is a private directory of
    this user's (:func:`router_core.run_dir.check_private`: mode 0700, not a link)."""
    from pathlib import Path

    from router_core.run_dir import RunDirError, check_private

    given: str | None = args.run_dir
    if given is not None:
        try:
            check_private(Path(given))
        except RunDirError as exc:
            raise UsageError(f"--run-dir {given}: {exc}") from None
    return given


def stack_key(args: argparse.Namespace, directory: str | None) -> str | None:
    """The stack key (:func:`router_core.credentials.resolve_key`): ``--key-file``, else
    the run directory's; :class:`UsageError` for a key file that cannot be used."""
    from router_core.credentials import KeyFileError, resolve_key

    try:
        return resolve_key(args.key_file, directory)
    except KeyFileError as exc:
        raise UsageError(str(exc)) from None


def add_state_file_flag(parser: argparse.ArgumentParser, name: str, holds: str) -> None:
    """``--state-file``: where a process keeps ``holds`` across its restarts (default
    ``name`` in ``--run-dir``; none without one)."""
    parser.add_argument(
        "--state-file",
        help=f"where {holds} are kept across restarts (default: {name} in --run-dir; "
        "none without one)",
    )


def state_file(args: argparse.Namespace, directory: str | None, name: str) -> str | None:
    """``--state-file``, else ``name`` in the run directory, else None."""
    given: str | None = args.state_file
    if given is None and directory:
        given = os.path.join(directory, name)
    return given


def checked_endpoint(
    explicit: str | None, default: str | None, flag: str, *, allow_remote: bool
) -> str:
    """``explicit``, else ``default``, checked (:func:`router_core.endpoints.check_endpoint`).

    :class:`UsageError` naming ``flag`` when neither is given, or for a refused endpoint.
    """
    from router_core.endpoints import EndpointError, check_endpoint

    chosen = explicit or default
    if chosen is None:
        raise UsageError(f"{flag} is required without --run-dir")
    try:
        return check_endpoint(chosen, allow_remote=allow_remote)
    except EndpointError as exc:
        raise UsageError(str(exc)) from exc


def add_beacon_flag(parser: argparse.ArgumentParser) -> None:
    """``--router-workers-endpoint``: where an output-path process says its incarnation."""
    parser.add_argument(
        "--router-workers-endpoint",
        help="the tokenizer router's workers PULL, told this process's incarnation each "
        "second so the workers notice a restart (default: in --run-dir; none without one)",
    )


def beacon_endpoint(args: argparse.Namespace, directory: str | None) -> str | None:
    """``--router-workers-endpoint``, else the run directory's, else None (no beacon)."""
    from router_core.endpoints import RouterEndpoints

    default = RouterEndpoints.in_run_dir(directory).workers if directory else None
    if args.router_workers_endpoint is None and default is None:
        return None
    return checked_endpoint(
        args.router_workers_endpoint,
        default,
        "--router-workers-endpoint",
        allow_remote=args.allow_remote,
    )


def tokenizer_flag(args: argparse.Namespace) -> TextCodec:
    """The tokenizer ``--tokenizer`` names (the built-in one without it);
    :class:`UsageError` ``--tokenizer PATH: <what is wrong and what is expected>``."""
    from switchboard.text import TokenizerLoadError, load_tokenizer

    path: str | None = args.tokenizer
    try:
        return load_tokenizer(path) if path is not None else load_tokenizer()
    except TokenizerLoadError as exc:
        raise UsageError(f"--tokenizer {exc.path}: {exc.reason}") from exc


def log_format(who: str = "%(name)s") -> str:
    """Every process's log line: time, level, ``who`` (the logger's name) and the pid."""
    return f"%(asctime)s %(levelname)s {who}[%(process)d]: %(message)s"


def configure_logging(level: str | int, *, who: str = "%(name)s") -> None:
    """Log at ``level`` to stderr in :func:`log_format`."""
    logging.basicConfig(
        level=level.upper() if isinstance(level, str) else level, format=log_format(who)
    )


def serve(service: Service, args: argparse.Namespace, *, role: str = "") -> int:
    """Run a process's loop until signalled; exit status 0.

    Logging is set up from ``--log-level``; ``--parent-pid`` ties the process to its
    supervisor. A router (``role`` given) is traced as that role when ``OTEL_*`` says so;
    the engine and the detokenizers set up their own tracing in ``run``.
    """
    from router_core import tracing
    from router_core.process import die_with_parent, serve_until_signalled

    configure_logging(args.log_level)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    if role:
        tracing.setup(role, role)
    try:
        serve_until_signalled(service)
    finally:
        tracing.shutdown()
    return 0
