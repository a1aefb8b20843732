"""``switchboard up``: its flags (one per setting) and running the supervisor.

:mod:`switchboard.cli` calls :func:`add_parser` and :func:`run`. Flags are generated from
:class:`StackSettings`, so every setting has a flag (a renamed one keeps its old flag as
an alias), and each flag's help names its environment variable and default.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

from pydantic.fields import FieldInfo

from switchboard.cli.support import configure_logging
from switchboard.supervisor.settings import (
    RENAMED,
    SettingsError,
    StackSettings,
    env_name,
    flag_name,
    load_settings,
)

__all__ = ["DEFAULT_WAIT_TIMEOUT_S", "add_parser", "run"]

#: How long ``--detach`` waits by default: the stack's own startup bound (60 s) plus a
#: first run's tokenizer training and model load before it.
DEFAULT_WAIT_TIMEOUT_S = 180.0

_DESCRIPTION = """\
Start the whole stack (router, detokenizer router, detokenizers, the built-in engine, the
HTTP workers and the admin app), print one line saying where it serves and where the
operator console is, restart any process that dies, and on SIGTERM or Ctrl-C drain the
workers and stop everything. With no admin token configured, one operator token is
generated and the console URL on the serving line carries it.

Each setting is a flag, a SWITCHBOARD_* environment variable, or a key of the --config
TOML file; flags win over the environment, the environment over the file.

With --detach the stack runs in the background, its output in <run dir>/supervisor.log,
and up returns once it serves; switchboard logs shows that log, switchboard down stops
the stack."""


def _default_text(info: FieldInfo) -> str:
    default = info.get_default()
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "on" if default else "off"
    return str(default)


def _help(name: str, info: FieldInfo, old_names: list[str]) -> str:
    variables = " or ".join(env_name(each) for each in (name, *old_names))
    text = f"{info.description} (env {variables}; default {_default_text(info)})"
    return text.replace("%", "%%")


def add_parser(sub: Any) -> None:
    """Add the ``up`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "up",
        help="start, watch and stop the whole stack",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of settings, one top-level key per setting below (named like the "
        "flag, with underscores); an unknown key is an error (default: none, flags, "
        "environment and defaults only)",
    )
    _add_detach_flags(parser)
    old_names: dict[str, list[str]] = {}
    for old, name in RENAMED.items():
        old_names.setdefault(name, []).append(old)
    for name, info in StackSettings.model_fields.items():
        olds = old_names.get(name, [])
        flags = (flag_name(name), *(flag_name(old) for old in olds))
        # SUPPRESS leaves a flag that was not given out of the namespace, so it does not
        # override the environment or the file with its default.
        if info.annotation is bool:
            # --allow-remote / --no-allow-remote, --metrics / --no-metrics.
            parser.add_argument(
                *flags,
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=_help(name, info, olds),
            )
        else:
            parser.add_argument(
                *flags,
                dest=name,
                metavar=name.upper(),
                default=argparse.SUPPRESS,
                help=_help(name, info, olds),
            )


def _add_detach_flags(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS, as for the settings: the namespace holds only what was given.
    parser.add_argument(
        "--detach",
        action="store_true",
        default=argparse.SUPPRESS,
        help="start the stack in the background (a session of its own, output appended to "
        "<run dir>/supervisor.log; needs a run dir) and exit 0 once it serves, printing "
        "its URLs, run dir and supervisor pid; non-zero, naming the cause, if it does not",
    )
    parser.add_argument(
        "--wait-timeout-s",
        type=_positive_seconds,
        default=argparse.SUPPRESS,
        metavar="S",
        help="with --detach, how long to wait for the stack to serve before stopping it "
        f"and failing (default {DEFAULT_WAIT_TIMEOUT_S:g})",
    )
    # How a detached supervisor learns the token its starter waits for (an operator has
    # no use for it, but every flag of up has its help).
    parser.add_argument(
        "--detached-incarnation",
        metavar="TOKEN",
        default=argparse.SUPPRESS,
        help="given by up --detach to the supervisor it starts: run as the run dir's "
        "detached supervisor, recording TOKEN in <run dir>/supervisor.json (default: "
        "none, a supervisor in the foreground)",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _child_argv(args: argparse.Namespace) -> list[str]:
    """The command line of a detached supervisor: this ``up``'s settings, no --detach."""
    argv = [sys.executable, "-m", "switchboard.cli", "up"]
    if args.config is not None:
        argv += ["--config", args.config]
    for name, value in _given_flags(args).items():
        if isinstance(value, bool):
            argv.append(flag_name(name) if value else f"--no-{flag_name(name)[2:]}")
        else:
            argv += [flag_name(name), str(value)]
    return argv


def _given_flags(args: argparse.Namespace) -> dict[str, Any]:
    given = vars(args)
    return {name: given[name] for name in StackSettings.model_fields if name in given}


def run(args: argparse.Namespace) -> int:
    """Run the stack until SIGTERM; the exit status (2 for a bad setting, in one line).

    With ``--detach``, start it in the background and return once it serves
    (:func:`~switchboard.supervisor.detach.start_detached`); with
    ``--detached-incarnation``, be that background supervisor, the run directory's
    (:func:`~switchboard.supervisor.stack_record.detached_record`).
    """
    try:
        settings = load_settings(_given_flags(args), config_file=args.config)
    except SettingsError as exc:
        print(f"switchboard up: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "detach", False):
        from switchboard.supervisor.detach import start_detached

        wait_s = getattr(args, "wait_timeout_s", DEFAULT_WAIT_TIMEOUT_S)
        return start_detached(settings, _child_argv(args), wait_s, sys.stdout, sys.stderr)
    incarnation = getattr(args, "detached_incarnation", None)
    if incarnation is None:
        return _supervise(settings)
    return _supervise_detached(settings, incarnation)


def _supervise_detached(settings: StackSettings, incarnation: str) -> int:
    from router_core.run_dir import RunDirError, make_private
    from switchboard.supervisor.stack_record import LockBusy, detached_record

    if settings.run_dir is None:
        print("switchboard up: a detached supervisor needs a run dir", file=sys.stderr)
        return 2
    try:
        run_dir = make_private(settings.run_dir.expanduser()).resolve()
        with detached_record(run_dir, incarnation) as announce:
            return _supervise(settings, on_serving=announce)
    except LockBusy:
        print(
            f"switchboard up: a stack is already running from run dir {settings.run_dir}",
            file=sys.stderr,
        )
        return 1
    except (RunDirError, OSError) as exc:
        print(f"switchboard up: run_dir {settings.run_dir}: {exc}", file=sys.stderr)
        return 2


def _supervise(settings: StackSettings, on_serving: Callable[[str], None] | None = None) -> int:
    # Imported here: every switchboard command builds this subcommand's parser, and the
    # routers, engine and detokenizers it starts should not pay for the supervisor.
    from switchboard.supervisor.preflight import preflight
    from switchboard.supervisor.rundir import RunDirectory
    from switchboard.supervisor.supervise import Supervisor

    try:
        configure_logging(settings.log_level_number())
        # The readiness probes poll /health; one log line per probe is noise.
        logging.getLogger("httpx").setLevel(max(logging.WARNING, settings.log_level_number()))
        tokenizer = preflight(settings)
        run_dir = RunDirectory(settings.run_dir, settings.stack_key_file)
        run_dir.open()
    except SettingsError as exc:
        print(f"switchboard up: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"switchboard up: cannot create the run dir: {exc}", file=sys.stderr)
        return 2
    return Supervisor(settings, run_dir, tokenizer=tokenizer, on_serving=on_serving).run()
