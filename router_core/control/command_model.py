"""What an operator command is: one declarative object that every surface is built from.

A :class:`ControlCommand` names the command, its argument struct and the type its reply
decodes as (the wire contract of the control socket), and — where people reach it —
its HTTP route and role (:class:`Http`), its ``switchboard`` subcommand (:class:`Cli`),
its console control (:class:`Console`), whether it is a barrier, which of its arguments
its audit line carries, and the engine message it sends (:class:`EngineStep`) when the
engine takes part. The router's command table, the engine link's command kinds, the
admin routes, the admin app's client, the CLI, the console (through ``GET
/api/commands``) and the command table of ``docs/operations.md`` are all read from
these objects; what stays per command is its handler in the router core and, where the
engine takes part, in the engine.

A command's arguments are its struct's fields, written once: the type (a ``Literal``
gives the choices), the default, the bounds and the one-line help
(``Annotated[T, msgspec.Meta(description=...)]``); :attr:`ControlCommand.arguments`
reads them. An argument named ``{name}`` in the HTTP path travels in the path, every
other one in the JSON body.

Pure data: no sockets and no HTTP code, so the CLI imports it without FastAPI and the
router without the admin app.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import msgspec
import msgspec.inspect as mi

from router_core.wire import Kind

__all__ = [
    "Argument",
    "ArgumentType",
    "Cli",
    "Console",
    "ConsoleScope",
    "ControlCommand",
    "EngineStep",
    "Http",
    "Method",
    "Place",
    "Rendering",
    "Role",
    "Server",
    "arguments_of",
]

ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)
ReplyT = TypeVar("ReplyT")

Role = Literal["viewer", "operator"]
Method = Literal["GET", "POST"]
#: Where an argument travels over HTTP: a field of the JSON body, or a ``{name}`` of the path.
Place = Literal["body", "path"]
#: Where the console offers an action: with the pause controls, on each worker's row,
#: or in the engine's panel.
ConsoleScope = Literal["generation", "worker", "engine"]
#: Who answers a command: a router over its control socket, or the admin app itself.
Server = Literal["tokenizer_router", "detokenizer_router", "admin"]
#: An argument's value type, as a command line parses it.
ArgumentType = Literal["str", "bool", "int", "float"]


@dataclass(frozen=True, eq=False)
class Http:
    """The admin API's route: method, path, the role a token needs, SGLang's paths for it.

    ``aliases`` are served by the admin app and, on the serving port, passed on to it by
    every worker (SGLang's tooling calls them there); an alias's body may carry fields
    SGLang sends that mean nothing here (they are ignored, never refused). ``renames``
    maps an alias body's field names to the command's (SGLang's ``model_path`` is our
    ``model``).
    """

    method: Method
    path: str
    role: Role
    aliases: tuple[str, ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    #: The ``message`` of SGLang's success answer at an alias on the serving port.
    sglang_message: str = ""
    #: Methods besides ``method`` the serving port takes at the aliases (SGLang serves
    #: ``/flush_cache`` on GET too); each is passed on to the admin app as ``method``.
    sglang_methods: tuple[Method, ...] = ()
    #: Arguments the route sets itself and does not offer (``{name: value}``).
    fixed: Mapping[str, Any] = field(default_factory=dict)


#: How the CLI shows an answer as text (``--json`` prints it as it came): a status block,
#: a workers table, one worker, a load report, a barrier's operation, a freeze-GC answer,
#: or (``fields``) each top-level field as ``key  value``.
Rendering = Literal["status", "workers", "worker", "load", "operation", "freeze_gc", "fields"]


@dataclass(frozen=True, eq=False)
class Cli:
    """A ``switchboard <name>`` subcommand: its name, its help line, how its answer is
    shown, whether it takes ``--watch`` (a read shown again every few seconds) or
    ``--wait`` (a worker's drain followed until it is safe to delete), and older
    spellings of its flags that are still accepted (``{argument: ("--old",)}``)."""

    name: str
    help: str
    render: Rendering = "fields"
    watch: bool = False
    wait: bool = False
    flag_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Console:
    """A control of the console: where, its label, the question it asks before it acts
    (empty: none), and, for a worker's action, the worker states it applies in."""

    scope: ConsoleScope
    label: str
    confirm: str = ""
    states: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineStep:
    """The message the router sends the engine for this command: its kind and payload."""

    kind: Kind
    payload: type[msgspec.Struct]


@dataclass(frozen=True)
class Argument:
    """One argument, read from a field of the command's struct (:func:`arguments_of`)."""

    name: str
    place: Place
    summary: str
    type: ArgumentType
    required: bool
    default: str | bool | int | float | None
    choices: tuple[str, ...] = ()
    #: Exclusive lower bound and inclusive upper bound, when the struct sets them.
    above: float | None = None
    at_most: float | None = None
    #: The longest text it may be, when the struct sets it.
    max_length: int | None = None
    #: Whether ``null`` is a value it takes (the receiver's own default).
    nullable: bool = False

    @property
    def flag(self) -> str:
        """Its command-line option: ``--timeout-s`` for ``timeout_s``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True, eq=False)
class ControlCommand(Generic[ArgsT, ReplyT]):
    """One operator command (see the module docstring).

    ``reply_type`` is what ``msgspec.convert`` turns the result into (``ReplyT``; a
    generic alias such as ``list[WorkerView]`` is fine). ``mutates`` marks a command
    that changes the stack: the router and the admin app write an audit line for each
    run of it, naming the ``audit`` arguments. ``barrier`` marks one that waits for every
    worker's and the engine's acknowledgement: its reply is an operation that may be
    incomplete (the API's 504).
    """

    name: str
    args_type: type[ArgsT]
    reply_type: Any
    summary: str
    mutates: bool = False
    barrier: bool = False
    http: Http | None = None
    cli: Cli | None = None
    console: Console | None = None
    audit: tuple[str, ...] = ()
    engine: EngineStep | None = None
    served_by: Server = "tokenizer_router"

    @property
    def audited(self) -> bool:
        """Whether each call writes an audit line (every mutation does)."""
        return self.mutates

    @property
    def route(self) -> Http:
        """Its HTTP route; ValueError for a command people do not reach over HTTP."""
        if self.http is None:
            raise ValueError(f"{self.name} has no HTTP route")
        return self.http

    @property
    def method(self) -> Method:
        return self.route.method

    @property
    def path(self) -> str:
        return self.route.path

    @property
    def role(self) -> Role:
        return self.route.role

    @property
    def aliases(self) -> tuple[str, ...]:
        return self.route.aliases

    @property
    def paths(self) -> tuple[str, ...]:
        """Its admin path, then SGLang's aliases of it (none without an HTTP route)."""
        return () if self.http is None else (self.http.path, *self.http.aliases)

    @property
    def arguments(self) -> tuple[Argument, ...]:
        """Its arguments, in the struct's field order (those its route fixes left out)."""
        if self.http is None:
            return arguments_of(self.args_type, "")
        every = arguments_of(self.args_type, self.http.path)
        return tuple(argument for argument in every if argument.name not in self.http.fixed)

    def body_arguments(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if argument.place == "body")

    def path_for(self, **parameters: str) -> str:
        """Its path with each ``{name}`` replaced by its value, quoted as one segment."""
        path = self.route.path
        for argument in self.arguments:
            if argument.place == "path":
                value = quote(parameters[argument.name], safe="")
                path = path.replace("{" + argument.name + "}", value)
        return path


_SCALARS: Mapping[type[mi.Type], ArgumentType] = {
    mi.StrType: "str",
    mi.BoolType: "bool",
    mi.IntType: "int",
    mi.FloatType: "float",
}


@functools.cache
def arguments_of(args_type: type[msgspec.Struct], path: str) -> tuple[Argument, ...]:
    """The arguments of ``args_type``'s fields; a field named ``{field}`` in ``path``
    goes in the path. TypeError for a field an operator cannot type (a list, a struct)."""
    info = mi.type_info(args_type)
    assert isinstance(info, mi.StructType)
    hints = typing.get_type_hints(args_type, include_extras=True)
    return tuple(_argument(each, hints[each.name], path) for each in info.fields)


def _literal_values(hint: Any) -> tuple[str, ...]:
    """A ``Literal``'s values in the order they are written (inspection sorts them)."""
    if typing.get_origin(hint) is Literal:
        return tuple(str(value) for value in typing.get_args(hint))
    return tuple(value for each in typing.get_args(hint) for value in _literal_values(each))


def _argument(field_info: mi.Field, hint: Any, path: str) -> Argument:
    kind: mi.Type = field_info.type
    summary = ""
    offered: dict[str, Any] = {}
    if isinstance(kind, mi.Metadata):
        summary = str((kind.extra_json_schema or {}).get("description", ""))
        offered = dict(kind.extra or {})
        kind = kind.type
    nullable = isinstance(kind, mi.UnionType) and any(
        isinstance(each, mi.NoneType) for each in kind.types
    )
    if nullable:
        assert isinstance(kind, mi.UnionType)
        (kind,) = (each for each in kind.types if not isinstance(each, mi.NoneType))
        if isinstance(kind, mi.Metadata):
            summary = summary or str((kind.extra_json_schema or {}).get("description", ""))
            offered = offered or dict(kind.extra or {})
            kind = kind.type
    choices: tuple[str, ...] = ()
    if isinstance(kind, mi.LiteralType):
        choices = _literal_values(hint)
        scalar: ArgumentType = "str"
    elif type(kind) in _SCALARS:
        scalar = _SCALARS[type(kind)]
    else:
        raise TypeError(f"{field_info.name}: {kind} is not an operator's argument")
    default = None if field_info.default is msgspec.NODEFAULT else field_info.default
    # What the API and the CLI offer may differ from the wire's absent value (a barrier's
    # timeout: 5 s offered; absent on the control socket, the router's own).
    default = offered.get("offered_default", default)
    max_length = getattr(kind, "max_length", None)
    above = getattr(kind, "gt", None)
    at_most = getattr(kind, "le", None)
    return Argument(
        name=field_info.name,
        place="path" if "{" + field_info.name + "}" in path else "body",
        summary=summary,
        type=scalar,
        required=field_info.required,
        default=default,
        choices=choices,
        above=None if above is None else float(above),
        at_most=None if at_most is None else float(at_most),
        max_length=max_length,
        nullable=nullable,
    )
