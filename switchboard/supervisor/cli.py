"""``switchboard up``: its flags (one per setting) and running the supervisor.

:mod:`switchboard.cli` calls :func:`add_parser` and :func:`run`. Flags are generated from
:class:`StackSettings`, so every setting has a flag (a renamed one keeps its old flag as
an alias), and each flag's help names its environment variable and default.
"""

from __future__ import annotations

import argparse
import logging
import sys
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

__all__ = ["add_parser", "run"]

_DESCRIPTION = """\
Start the whole stack (router, detokenizer router, detokenizers, the built-in engine, the
HTTP workers and the admin app), print one line saying where it serves and where the
operator console is, restart any process that dies, and on SIGTERM or Ctrl-C drain the
workers and stop everything. With no admin token configured, one operator token is
generated and the console URL on the serving line carries it.

Each setting is a flag, a SWITCHBOARD_* environment variable, or a key of the --config
TOML file; flags win over the environment, the environment over the file."""


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


def _given_flags(args: argparse.Namespace) -> dict[str, Any]:
    given = vars(args)
    return {name: given[name] for name in StackSettings.model_fields if name in given}


def run(args: argparse.Namespace) -> int:
    """Run the stack until SIGTERM; the exit status (2 for a bad setting, in one line)."""
    # Imported here: every switchboard command builds this subcommand's parser, and the
    # routers, engine and detokenizers it starts should not pay for the supervisor.
    from switchboard.supervisor.preflight import preflight
    from switchboard.supervisor.rundir import RunDirectory
    from switchboard.supervisor.supervise import Supervisor

    try:
        settings = load_settings(_given_flags(args), config_file=args.config)
        configure_logging(settings.log_level_number())
        # The readiness probes poll /health; one log line per probe is noise.
        logging.getLogger("httpx").setLevel(max(logging.WARNING, settings.log_level_number()))
        tokenizer = preflight(settings)
        run_dir = RunDirectory(settings.run_dir)
        run_dir.open()
    except SettingsError as exc:
        print(f"switchboard up: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"switchboard up: cannot create the run dir: {exc}", file=sys.stderr)
        return 2
    return Supervisor(settings, run_dir, tokenizer=tokenizer).run()
