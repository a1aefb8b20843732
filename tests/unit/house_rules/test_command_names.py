"""House rule: a command is named in its object and its handlers, nowhere else.

Every operator command is one object of ``router_core/control/commands.py``; the
routes, the client, the CLI, the console and the docs' table read it from there. So:

* its HTTP paths and its CLI name are written only there;
* its name is written only there, in the router's handler table, in the engine's (for a
  command the engine carries out), and in the admin app's route modules (which bind the
  reads the app composes by name) — except the names that are also a word of another
  concept, each listed below with that concept.

The rule reads string constants of parsed Python (a docstring or a comment naming a
command is fine) and quoted strings of the console's scripts and page.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from router_core.control.commands import (
    DETOKENIZER_ROUTER_COMMANDS,
    OPERATOR_COMMANDS,
    TOKENIZER_ROUTER_COMMANDS,
)
from tests.unit.house_rules.source_tree import REPO, parse, source_files

#: Where a command may be named.
OBJECTS = "router_core/control/commands.py"
HANDLERS = frozenset(
    {
        OBJECTS,
        "router_core/tokenizer_router/commands.py",
        "switchboard/engine/operator_commands.py",
    }
)
#: The admin app's route modules bind the reads it composes by the command's name.
ROUTE_MODULES = "app/routers/"

#: Command names and CLI names that are also the word of another concept, and that concept.
OTHER_CONCEPTS = {
    "workers": "the workers of the stack (the CLI name of list_workers)",
    "pause": "the barrier's action (OperationOutcome.action) and a worker's state word",
    "continue": "the barrier's action (OperationOutcome.action)",
    "abort": "a pause mode and a finish reason",
    "drain": "the DRAIN message and a registry transition",
    "undrain": "a registry transition",
    "load": "the LOAD kind and load snapshots",
    "status": "HTTP statuses, health answers and audit fields",
    "metrics": "Prometheus metrics and their directories",
    "events": "the engine's events socket",
    "audit": "the audit log",
    "commands": "the admin app's router module of that name",
    "history": "the admin app's router module of that name",
    "whoami": "the admin app's router module of that name",
    "freeze_gc": "the FREEZE_GC kind's metric label",
}

COMMANDS = [
    *OPERATOR_COMMANDS,
    *TOKENIZER_ROUTER_COMMANDS.values(),
    *DETOKENIZER_ROUTER_COMMANDS.values(),
]


def strict_words() -> dict[str, str]:
    """Each word that may appear only in the objects: ``{word: what it is}``."""
    words: dict[str, str] = {}
    for command in COMMANDS:
        for path in command.paths:
            words[path] = f"a path of {command.name}"
        if command.cli is not None and command.cli.name not in OTHER_CONCEPTS:
            words[command.cli.name] = f"the CLI name of {command.name}"
    return words


def names() -> set[str]:
    """Command names that mean nothing else: named only in objects and handlers."""
    return {command.name for command in COMMANDS} - set(OTHER_CONCEPTS)


def python_strings(tree: ast.AST) -> Iterable[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno


def quoted(text: str, word: str) -> list[int]:
    """The lines of ``text`` where ``word`` stands quoted (``"w"``, ``'w'``, backticks)."""
    pattern = re.compile(r"[\"'`]" + re.escape(word) + r"[\"'`]")
    return [text[: match.start()].count("\n") + 1 for match in pattern.finditer(text)]


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def offences() -> list[str]:
    strict, only_named = strict_words(), names()
    found: list[str] = []
    for path in source_files():
        where = relative(path)
        for value, line in python_strings(parse(path)):
            if value in strict and where != OBJECTS:
                found.append(f"{where}:{line}: {value!r} ({strict[value]})")
            elif (
                value in only_named
                and where not in HANDLERS
                and not where.startswith(ROUTE_MODULES)
            ):
                found.append(f"{where}:{line}: {value!r} (a command's name)")
    for path in [*(REPO / "app/static").glob("*.js"), *(REPO / "app/static").glob("*.html")]:
        text = path.read_text(encoding="utf-8")
        for word in [*strict, *only_named]:
            found += [f"{relative(path)}:{line}: {word!r}" for line in quoted(text, word)]
    return found


def test_no_command_is_named_outside_its_object_and_handlers() -> None:
    """Paths and CLI names only in the objects; names only there and in handlers."""
    assert offences() == []


def test_every_exception_is_a_command() -> None:
    """The list of other concepts names commands only (a stale entry fails)."""
    cli = {command.cli.name for command in COMMANDS if command.cli is not None}
    assert set(OTHER_CONCEPTS) <= {command.name for command in COMMANDS} | cli


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('path = "/api/flush_cache"\n', True),
        ('name = "flush-cache"\n', True),
        ('command = "flush_cache"\n', True),
        ('"""Calls flush_cache."""\n', False),
        ('mode = "abort"\n', False),
    ],
)
def test_the_scanner_catches_what_it_should(source: str, caught: bool) -> None:
    """Shown a violation, the scanner finds it; a docstring or another concept passes."""
    tree = ast.parse(source)
    strict, only_named = strict_words(), names()
    values = [value for value, _ in python_strings(tree) if not value.startswith("Calls")]
    assert any(value in strict or value in only_named for value in values) is caught
