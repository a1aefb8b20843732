"""Every command of the admin API, as data: the one list the routes, the CLI and the
console are derived from.

Each :class:`Command` names its HTTP method and path (and SGLang's alias paths), the
role a token needs, whether it is audited, its arguments, a one-line summary, its CLI
command (if any) and its console action (if any). :mod:`app.routers` serves each entry
at its path behind its role (:func:`app.routers.binding.bind`);
:mod:`switchboard.admin_cli` builds one subcommand per entry with a :class:`CliCommand`;
the console reads ``GET /api/commands`` and offers one control per entry with a
:class:`ConsoleAction`. Adding an operator action is an entry here and its handlers.

Pure data and free of HTTP imports: the CLI imports it without loading FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote

__all__ = [
    "ABORT_ALL",
    "COMMANDS",
    "DEFAULT_BARRIER_TIMEOUT_S",
    "DEFAULT_PAUSE_MODE",
    "MODE",
    "PAUSE_MODES",
    "RID",
    "TIMEOUT",
    "WORKER_ID",
    "Argument",
    "CliCommand",
    "Command",
    "ConsoleAction",
    "ConsoleScope",
    "Method",
    "Place",
    "Role",
    "by_cli_name",
    "command",
]

Role = Literal["viewer", "operator"]
Method = Literal["GET", "POST"]
#: Where an argument travels: a field of the JSON body, or a ``{name}`` of the path.
Place = Literal["body", "path"]
#: Where the console offers an action: with the pause controls, on each worker's row,
#: or in the engine's panel.
ConsoleScope = Literal["generation", "worker", "engine"]

#: The pause modes, in the order people are offered them.
PAUSE_MODES: Final = ("abort", "retract", "in_place")
#: The mode of a pause that names none.
DEFAULT_PAUSE_MODE: Final = "abort"
#: Seconds a barrier waits for its acknowledgements when its caller names no timeout.
DEFAULT_BARRIER_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class Argument:
    """One argument of a command: ``name`` as it is on the wire, ``place`` where it goes.

    ``cli_flag`` is its option on the command line (``None``: a positional argument
    shown as ``metavar``), ``cli_aliases`` older spellings of it that are still accepted;
    ``default`` is what the API assumes when it is left out.
    """

    name: str
    place: Place
    summary: str
    choices: tuple[str, ...] = ()
    default: str | bool | float | None = None
    cli_flag: str | None = None
    cli_aliases: tuple[str, ...] = ()
    metavar: str | None = None


@dataclass(frozen=True)
class CliCommand:
    """A ``switchboard <name>`` subcommand: its name and the line its help shows."""

    name: str
    help: str


@dataclass(frozen=True)
class ConsoleAction:
    """A control of the console: its label, where it is, and, for a worker's action,
    the worker states in which it applies."""

    scope: ConsoleScope
    label: str
    states: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """One command of the admin API (see the module docstring)."""

    name: str
    method: Method
    path: str
    role: Role
    summary: str
    aliases: tuple[str, ...] = ()
    arguments: tuple[Argument, ...] = ()
    #: Whether each call writes an audit line (every mutation does).
    audited: bool = False
    cli: CliCommand | None = None
    console: ConsoleAction | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """The path, then SGLang's aliases of it."""
        return (self.path, *self.aliases)

    def body_arguments(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if argument.place == "body")

    def path_for(self, **parameters: str) -> str:
        """The path with each ``{name}`` replaced by its value, quoted as one segment."""
        path = self.path
        for argument in self.arguments:
            if argument.place == "path":
                path = path.replace(
                    "{" + argument.name + "}", quote(parameters[argument.name], safe="")
                )
        return path


MODE = Argument(
    "mode",
    "body",
    "abort: in-flight requests end with finish reason abort; retract: they go back to the "
    "engine's queue and finish after continue; in_place: they freeze where they are",
    choices=PAUSE_MODES,
    default=DEFAULT_PAUSE_MODE,
    cli_flag="--mode",
)
TIMEOUT = Argument(
    "timeout_s",
    "body",
    "seconds every worker and the engine get to acknowledge",
    default=DEFAULT_BARRIER_TIMEOUT_S,
    # Durations end in -s on every command line; --timeout is the old spelling.
    cli_flag="--timeout-s",
    cli_aliases=("--timeout",),
    metavar="S",
)
WORKER_ID = Argument("worker_id", "path", "the worker's id", metavar="ID")
RID = Argument(
    "rid",
    "body",
    "the request id to abort, as the client gave it (each sample of n > 1 has its own, <rid>_<i>)",
    default="",
)
ABORT_ALL = Argument(
    "abort_all", "body", "abort every request in the engine (rid is ignored)", default=False
)

#: Worker states a drain applies in, and those an undrain applies in.
_DRAINABLE: Final = ("starting", "serving", "paused")
_UNDRAINABLE: Final = ("draining", "drained")

#: Every command of the admin API, in the order the CLI's help lists them.
COMMANDS: Final[tuple[Command, ...]] = (
    Command(
        "status",
        "GET",
        "/api/status",
        "viewer",
        "pause state and mode, recent operations, engine, workers by state, versions",
        cli=CliCommand(
            "status", "show pause state, engine load, workers by state and recent operations"
        ),
    ),
    Command(
        "workers",
        "GET",
        "/api/workers",
        "viewer",
        "every worker the router knows, recently departed ones as dead",
        cli=CliCommand(
            "workers", "list the workers: state, in-flight, last heartbeat, safe to delete"
        ),
    ),
    Command(
        "worker_stats",
        "GET",
        "/api/worker_stats",
        "viewer",
        "each worker's requests, errors and latency over the last minute, from its metrics",
    ),
    Command(
        "worker",
        "GET",
        "/api/workers/{worker_id}",
        "viewer",
        "one worker",
        arguments=(WORKER_ID,),
    ),
    Command(
        "pause",
        "POST",
        "/api/pause",
        "operator",
        "pause generation on every worker and the engine (a barrier)",
        aliases=("/pause_generation",),
        arguments=(MODE, TIMEOUT),
        audited=True,
        cli=CliCommand("pause", "pause generation on every worker and the engine"),
        console=ConsoleAction("generation", "Pause"),
    ),
    Command(
        "continue",
        "POST",
        "/api/continue",
        "operator",
        "resume generation (a barrier)",
        aliases=("/continue_generation",),
        arguments=(TIMEOUT,),
        audited=True,
        cli=CliCommand("continue", "resume generation after a pause"),
        console=ConsoleAction("generation", "Continue"),
    ),
    Command(
        "drain",
        "POST",
        "/api/workers/{worker_id}/drain",
        "operator",
        "stop one worker admitting requests; it reaches drained once empty",
        arguments=(WORKER_ID,),
        audited=True,
        cli=CliCommand("drain", "stop one worker admitting requests (it finishes those it has)"),
        console=ConsoleAction("worker", "Drain", _DRAINABLE),
    ),
    Command(
        "undrain",
        "POST",
        "/api/workers/{worker_id}/undrain",
        "operator",
        "let a draining or drained worker admit requests again",
        arguments=(WORKER_ID,),
        audited=True,
        cli=CliCommand("undrain", "let a draining or drained worker admit requests again"),
        console=ConsoleAction("worker", "Undrain", _UNDRAINABLE),
    ),
    Command(
        "abort",
        "POST",
        "/api/abort",
        "operator",
        "abort one request in the engine by its id, or every request",
        aliases=("/abort_request",),
        arguments=(RID, ABORT_ALL),
        audited=True,
    ),
    Command(
        "load",
        "GET",
        "/api/load",
        "viewer",
        "the engine's latest load report",
        cli=CliCommand("load", "show the engine's latest load report"),
    ),
    Command(
        "freeze_gc",
        "POST",
        "/api/freeze_gc",
        "operator",
        "freeze the garbage collector in the router, the engine, detokenizers and workers",
        audited=True,
        cli=CliCommand(
            "freeze-gc",
            "freeze the garbage collector in the router, engine, detokenizers and workers "
            "(after warm-up)",
        ),
        console=ConsoleAction("engine", "Freeze GC"),
    ),
    Command("events", "GET", "/api/events", "viewer", "a server-sent event stream of changes"),
    Command(
        "audit",
        "GET",
        "/api/audit",
        "viewer",
        "the latest audit records of this admin app (who, what, result), newest first",
    ),
    Command("whoami", "GET", "/api/whoami", "viewer", "the token's name and role"),
    Command("commands", "GET", "/api/commands", "viewer", "this catalogue"),
)

_BY_NAME: Final[Mapping[str, Command]] = {entry.name: entry for entry in COMMANDS}


def command(name: str) -> Command:
    """The catalogue's entry ``name``; KeyError for a name it does not have."""
    return _BY_NAME[name]


def by_cli_name() -> dict[str, Command]:
    """``{CLI name: entry}`` of every entry the CLI offers, in catalogue order."""
    return {entry.cli.name: entry for entry in COMMANDS if entry.cli is not None}
