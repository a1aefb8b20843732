"""The command table of ``docs/operations.md``, written from the command objects.

:func:`command_table` is the Markdown table of every command of the admin API (its
method and paths, role, arguments with their defaults, CLI subcommand, console control
and whether the engine takes part); :func:`refreshed` puts it between the document's
``<!-- commands:begin -->`` and ``<!-- commands:end -->`` markers. A unit test checks
that the document holds exactly the table the objects give, so the guide cannot drift
from the code: after changing a command, run ``python -m app.command_table``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from app.catalogue import COMMANDS, Command
from router_core.control.command_model import Argument

__all__ = ["BEGIN", "DOC", "END", "command_table", "refreshed"]

BEGIN: Final = "<!-- commands:begin -->"
END: Final = "<!-- commands:end -->"
#: The guide that carries the table.
DOC: Final = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def _argument(argument: Argument) -> str:
    written = f"`{argument.name}`"
    if argument.place == "path":
        return written + " (path)"
    if argument.choices:
        written += " " + "\\|".join(f"`{choice}`" for choice in argument.choices)
    if argument.required:
        return written + " (required)"
    return written + f" = `{argument.default!r}`".replace("'", '"')


def _row(entry: Command) -> str:
    paths = ", ".join(f"`{entry.method} {path}`" for path in entry.paths)
    arguments = ", ".join(_argument(argument) for argument in entry.arguments) or "-"
    cli = f"`switchboard {entry.cli.name}`" if entry.cli else "-"
    console = f"{entry.console.label} ({entry.console.scope})" if entry.console else "-"
    traits = [
        trait
        for trait, present in (
            ("audited", entry.audited),
            ("barrier", entry.barrier),
            ("engine", entry.engine is not None),
        )
        if present
    ]
    cells = [
        f"`{entry.name}`",
        paths,
        entry.role,
        arguments,
        cli,
        console,
        ", ".join(traits) or "-",
        entry.summary,
    ]
    return "| " + " | ".join(cells) + " |"


def command_table() -> str:
    """Every command as one row of a Markdown table, in the catalogue's order."""
    head = "| command | method and paths | role | arguments | CLI | console | | what it does |"
    rule = "|---|---|---|---|---|---|---|---|"
    return "\n".join([head, rule, *(_row(entry) for entry in COMMANDS)])


def refreshed(text: str) -> str:
    """``text`` with the table between its markers replaced by :func:`command_table`;
    ValueError if the markers are missing."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{command_table()}\n{text[end:]}"


if __name__ == "__main__":
    DOC.write_text(refreshed(DOC.read_text()))
    sys.stdout.write(f"wrote the command table of {DOC}\n")
