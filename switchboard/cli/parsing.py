"""How the ``switchboard`` command line reports what it cannot parse, and ``--version``.

A bad command line is one line on stderr naming the subcommand it was meant for
(``switchboard pause: error: unrecognized arguments: --modee in_place (did you mean
--mode?) (see --help)``), exit status 2. Importing this module costs the standard
library only; the version is looked up only when ``--version`` is given.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

__all__ = ["OneLineParser", "VersionAction", "did_you_mean", "unrecognized"]


#: How alike a word and a suggestion must be (difflib's ratio): a slip of a letter or
#: two in a flag or key (``--modee``, ``wrokers``) passes, an unrelated word does not.
SUGGESTION_CUTOFF = 0.75


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean CLOSEST?)`` when one of ``choices`` is close to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=SUGGESTION_CUTOFF)
    return f" (did you mean {close[0]}?)" if close else ""


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    # argparse keeps a parser's actions in a private list; reading it is the only way
    # to learn which options a parser built elsewhere takes.
    return [option for action in parser._actions for option in action.option_strings]


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: ...`` for the words ``parser`` did not take, with the
    closest option of ``parser`` for each unknown option among them."""
    options = _option_strings(parser)
    hints = []
    for word in extras:
        if word.startswith("-") and len(word) > 1:
            name = word.partition("=")[0]
            hint = did_you_mean(name, options)
            if hint and hint not in hints:
                hints.append(hint)
    return f"unrecognized arguments: {' '.join(extras)}{''.join(hints)}"


class OneLineParser(argparse.ArgumentParser):
    """Reports a bad command line in one line (``--help`` still prints the usage).

    Words nobody took are reported by the subcommand's parser, under the subcommand's
    name, rather than by the top-level one: :meth:`add_subcommands` remembers the
    subcommands so that :meth:`parse_args` can find the one chosen.
    """

    _subcommands: argparse._SubParsersAction[Any] | None = None

    def add_subcommands(self, **options: Any) -> argparse._SubParsersAction[Any]:
        """:meth:`add_subparsers`, remembered for :meth:`parse_args`."""
        self._subcommands = self.add_subparsers(**options)
        return self._subcommands

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def chosen(self, namespace: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the (innermost) subcommand ``namespace`` was parsed for."""
        if self._subcommands is None or self._subcommands.dest == argparse.SUPPRESS:
            return self
        name = getattr(namespace, self._subcommands.dest, None)
        parser = self._subcommands.choices.get(name) if isinstance(name, str) else None
        if parser is None:
            return self
        return parser.chosen(namespace) if isinstance(parser, OneLineParser) else parser

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """The namespace; exit 2 with the chosen subcommand's one-line error for any word
        no parser took."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where = self.chosen(parsed)
            where.error(unrecognized(extras, where))
        return parsed


class VersionAction(argparse.Action):
    """``--version``: print ``switchboard <version>`` (the installed distribution's) and
    exit 0. The version is read when the flag is given, not when the parser is built."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print switchboard's version and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> NoReturn:
        from router_core.version import package_version

        print(f"switchboard {package_version()}", flush=True)
        parser.exit(0)
