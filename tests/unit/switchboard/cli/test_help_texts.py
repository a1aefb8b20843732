"""Every flag of every ``switchboard`` subcommand says what it does and what it defaults to.

The walk goes over the real parser (``build_parser()``, the ``up`` flags generated from
the stack settings included), so a flag added anywhere without a help text, or with a
default its help does not show, fails here.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from switchboard.cli import build_parser

#: A help text that states a default: ``(default 5)``, ``default: in --run-dir``, ...
_STATES_DEFAULT = re.compile(r"\bdefault\b")


def subcommands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of each subcommand of the real ``switchboard`` parser."""
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


SUBCOMMANDS = dict(subcommands())


def shown_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help line ``--help`` prints for ``action``, ``%(default)s`` expanded."""
    return " ".join(parser._get_formatter()._expand_help(action).split())


def default_spellings(default: object) -> set[str]:
    """How a help text may write ``default``: ``10.0`` also as ``10``."""
    spellings = {str(default)}
    if isinstance(default, float):
        spellings.add(f"{default:g}")
    return spellings


def takes_a_value(action: argparse.Action) -> bool:
    return bool(action.option_strings) and action.nargs != 0


class TestHelpTexts:
    """Each option has a help text; one taking a value says its default."""

    def test_the_walk_sees_every_subcommand(self) -> None:
        """The walk covers the operator commands and the process commands alike."""
        assert {"router", "up", "worker", "pause", "workers", "freeze-gc"} <= set(SUBCOMMANDS)

    @pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
    def test_every_argument_has_help(self, command: str) -> None:
        """No option or positional of ``command`` goes without a description."""
        parser = SUBCOMMANDS[command]
        missing = [
            "/".join(action.option_strings) or action.dest
            for action in parser._actions
            if not action.help or action.help == argparse.SUPPRESS
        ]
        assert not missing, f"switchboard {command}: no help for {missing}"

    @pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
    def test_every_optional_value_shows_its_default(self, command: str) -> None:
        """An option taking a value, unless required, says its default, and a default it
        has is written in its help as argparse will use it."""
        parser = SUBCOMMANDS[command]
        problems = []
        for action in parser._actions:
            # A flag without help at all is test_every_argument_has_help's to report.
            if not takes_a_value(action) or action.required or not action.help:
                continue
            text = shown_help(parser, action)
            flag = action.option_strings[0]
            if not _STATES_DEFAULT.search(text):
                problems.append(f"{flag}: says no default: {text!r}")
            elif action.default not in (None, argparse.SUPPRESS) and not any(
                spelt in text for spelt in default_spellings(action.default)
            ):
                problems.append(f"{flag}: default {action.default!r} not shown: {text!r}")
        assert not problems, f"switchboard {command}: " + "; ".join(problems)

    def test_router_timing_flags(self) -> None:
        """The router's timing flags (docs/operations.md relies on them) describe
        themselves and show their defaults."""
        parser = SUBCOMMANDS["router"]
        texts = {
            option: shown_help(parser, action)
            for action in parser._actions
            for option in action.option_strings
        }
        for flag in (
            "--heartbeat-interval",
            "--heartbeat-timeout",
            "--barrier-timeout",
            "--engine-timeout",
        ):
            assert re.search(r"\(default \d+(\.\d+)?\)$", texts[flag]), texts[flag]
