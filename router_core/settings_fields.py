"""Settings fields that document their own command-line flag.

A settings dataclass of a process (``RouterSettings``, ``WorkerSettings``, ...) is the
one definition of its knobs: the default, the bound, the help text and the flag's
spelling (with any old spellings kept as aliases). :func:`flagged` is
:func:`dataclasses.field` with that description in the field's metadata; it is plain
data, so this package stays free of argparse, and ``switchboard.cli.flags`` turns it
into flags.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["FLAG_SPEC_KEY", "Bound", "FlagSpec", "flag_specs", "flagged"]

#: The metadata key under which a field's :class:`FlagSpec` is stored.
FLAG_SPEC_KEY: Final = "router_core.flag"

#: What a numeric flag's value must be: ``positive`` (> 0), ``non_negative`` (>= 0) or a
#: TCP ``port`` (1..65535); None takes any value of the field's type.
Bound = Literal["positive", "non_negative", "port"]


@dataclass(frozen=True)
class FlagSpec:
    """How one settings field is offered as a flag.

    ``flag`` is the option string (``--`` and the field name with dashes when empty);
    ``aliases`` are older spellings that set the same field.
    """

    help: str
    flag: str = ""
    aliases: tuple[str, ...] = ()
    bound: Bound | None = None

    def option(self, field_name: str) -> str:
        """The flag of field ``field_name``."""
        return self.flag or "--" + field_name.replace("_", "-")


def flagged(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str = "",
    aliases: tuple[str, ...] = (),
    bound: Bound | None = None,
) -> Any:
    """A dataclass field with ``default`` (none: required) that is also a flag."""
    spec = FlagSpec(help=help, flag=flag, aliases=aliases, bound=bound)
    return dataclasses.field(default=default, metadata={FLAG_SPEC_KEY: spec})


def flag_specs(settings_class: type) -> Iterator[tuple[dataclasses.Field[Any], FlagSpec]]:
    """Each field of the dataclass ``settings_class`` declared with :func:`flagged`."""
    for field in dataclasses.fields(settings_class):
        spec = field.metadata.get(FLAG_SPEC_KEY)
        if isinstance(spec, FlagSpec):
            yield field, spec
