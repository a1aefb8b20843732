"""A documented command checked without running it: what it names must exist.

For each simple command of a line (split at ``|``, ``&&``, ``;``, ``&``; leading
``VAR=value`` words and shell keywords skipped):

* ``switchboard ...`` (any path to it) is parsed by the real parser
  (:func:`switchboard.cli.build_parser`): the subcommand and every flag must exist and
  their values parse;
* ``make T ... RUN_ARGS="..."``: every target is a Makefile target, and ``RUN_ARGS``
  (``BENCH_ARGS``) parse as ``switchboard up`` (``bench router``) flags, the recipe's;
* ``python -m MODULE`` or ``python SCRIPT``: the module is importable or the script
  exists, and every ``--flag`` appears in its ``--help``;
* ``pytest``: every ``-m`` marker is declared in pyproject.toml;
* every relative path whose first part exists in the working directory (``deploy/...``,
  ``$PWD/dashboards/json``, ``--config.file=deploy/...``) exists (globs allowed).

:func:`bash_syntax` checks a whole block with ``bash -n``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import itertools
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "bash_syntax",
    "check_line",
    "make_targets",
    "simple_commands",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The Makefile variables whose value is the flags of a switchboard command.
MAKE_FLAG_VARIABLES = {"RUN_ARGS": ("up",), "BENCH_ARGS": ("bench", "router")}
_KEYWORDS = frozenset({"until", "while", "do", "done", "then", "if", "fi", "!", "time", "exec"})
_SEPARATORS = frozenset({"|", "||", "&", "&&", ";", ";;", "(", ")"})
_ASSIGNMENT = re.compile(r"^\w+=")
_TARGET = re.compile(r"^([\w.-]+(?:[ \t]+[\w.-]+)*)[ \t]*:(?!=)", re.MULTILINE)


def make_targets(makefile: str) -> frozenset[str]:
    """The targets a Makefile's text defines (rule heads; variables excluded)."""
    found: set[str] = set()
    for match in _TARGET.finditer(makefile):
        found.update(match.group(1).split())
    return frozenset(found)


def simple_commands(line: str) -> list[list[str]]:
    """The words of each simple command of a shell line, comments dropped, leading
    assignments and shell keywords skipped (``until curl ...; do sleep 1; done`` is
    ``[["curl", ...], ["sleep", "1"]]``)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in _SEPARATORS:
            commands.append([])
        elif commands[-1] or not (_ASSIGNMENT.match(word) or word in _KEYWORDS):
            commands[-1].append(word)
    return [words for words in commands if words]


def bash_syntax(script: str) -> str | None:
    """None when ``bash -n`` accepts ``script``, else its complaint."""
    result = subprocess.run(
        ["bash", "-n"], input=script, capture_output=True, text=True, timeout=10, check=False
    )
    return None if result.returncode == 0 else result.stderr.strip()


def _parse_switchboard(argv: Sequence[str]) -> str | None:
    from switchboard.cli import build_parser

    parser = build_parser(argv[0] if argv else None)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(list(argv))
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            return f"switchboard {shlex.join(argv)}: {errors.getvalue().strip()}"
    return None


@functools.cache
def _help_text(target: tuple[str, ...]) -> str:
    result = subprocess.run(
        [sys.executable, *target, "--help"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    return result.stdout + result.stderr


def _check_python(words: Sequence[str], cwd: Path) -> list[str]:
    if len(words) >= 3 and words[1] == "-m":
        module, rest = words[2], words[3:]
        if importlib.util.find_spec(module) is None:
            return [f"python -m {module}: no such module"]
        target: tuple[str, ...] = ("-m", module)
    elif len(words) >= 2 and words[1].endswith(".py"):
        script, rest = cwd / words[1], words[2:]
        if not script.is_file():
            return [f"python {words[1]}: no such script"]
        target = (str(script),)
    else:
        return []
    flags = {word.partition("=")[0] for word in rest if word.startswith("--")}
    known = _help_text(target)
    return [
        f"{' '.join(target)}: {flag} is not in its --help"
        for flag in sorted(flags)
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", known)
    ]


def _check_make(words: Sequence[str]) -> list[str]:
    targets = make_targets((REPO_ROOT / "Makefile").read_text())
    problems = []
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if equals:
            prefix = MAKE_FLAG_VARIABLES.get(name)
            if prefix is not None and (
                problem := _parse_switchboard([*prefix, *shlex.split(value)])
            ):
                problems.append(f"make {name}=...: {problem}")
        elif not word.startswith("-") and word not in targets:
            problems.append(f"make {word}: no such target in the Makefile")
    return problems


def _check_pytest(words: Sequence[str]) -> list[str]:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    declared = {
        entry.partition(":")[0] for entry in config["tool"]["pytest"]["ini_options"]["markers"]
    }
    problems = []
    for flag, value in itertools.pairwise(words):
        if flag == "-m":
            for name in re.findall(r"\w+", value):
                if name not in {"and", "or", "not"} and name not in declared:
                    problems.append(f"pytest -m {name}: no such marker in pyproject.toml")
    return problems


def _path_candidates(word: str) -> list[str]:
    value = word.partition("=")[2] if word.startswith("-") else word
    found = []
    for piece in value.split(":"):
        part = piece.removeprefix("$PWD/").removeprefix("./")
        if "/" in part and not part.startswith(("/", "-", "~")) and "$" not in part:
            found.append(part.rstrip("/"))
    return found


def _check_paths(words: Sequence[str], cwd: Path) -> list[str]:
    problems = []
    for word in words:
        if "://" in word:
            continue
        for candidate in _path_candidates(word):
            first = candidate.split("/")[0]
            if (cwd / first).exists() and not list(cwd.glob(candidate)):
                problems.append(f"{candidate}: no such file or directory (in {cwd})")
    return problems


def check_line(line: str, cwd: Path = REPO_ROOT, *, parse: bool = True) -> list[str]:
    """What is wrong with one documented command line, run from ``cwd`` (nothing: []).

    ``parse=False`` checks only the paths: for a console step, which is run and whose
    output (a usage error, say) the doc shows.
    """
    problems: list[str] = []
    for words in simple_commands(line):
        program = Path(words[0]).name
        if not parse:
            pass
        elif program == "switchboard" and (problem := _parse_switchboard(words[1:])):
            problems.append(problem)
        elif program == "make":
            problems += _check_make(words)
        elif re.fullmatch(r"python(3(\.\d+)?)?", program):
            problems += _check_python(words, cwd)
        elif program == "pytest":
            problems += _check_pytest(words)
        problems += _check_paths(words[1:], cwd)
    return problems
