"""The shell examples of a Markdown file, and the marker line that says how each is tested.

Pure: text in, data out. :func:`extract` finds every fenced block; a block *needs a
marker* when its info string is a shell language (:data:`SHELL_LANGUAGES`) or when any of
its lines is a ``switchboard`` or ``curl`` command (:data:`COMMAND_LINE`, with or without
a ``$ `` prompt). The marker is the line right before the fence::

    <!-- example: console stack=own setup="mkdir -m 755 /srv/sb" -->

its first word the kind (:data:`KINDS`), then ``key=value`` attributes (shell quoting).
What is wrong with the markers themselves (one with no block after it, an unknown kind,
a malformed attribute) is in :attr:`Document.problems`.

:func:`command_lines` and :func:`console_steps` cut a block into what a shell runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "COMMAND_LINE",
    "KINDS",
    "SHELL_LANGUAGES",
    "Block",
    "ConsoleStep",
    "Document",
    "Marker",
    "command_lines",
    "console_steps",
    "extract",
    "parse_marker",
]

#: Info strings whose blocks are shell examples.
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
#: How a marked block is tested (the test module's docstring says what each does).
KINDS = frozenset({"run", "console", "serve", "check", "output", "file"})
#: Attributes a marker may carry.
ATTRIBUTES = frozenset(
    {
        "stack",
        "setup",
        "teardown",
        "cwd",
        "probe",
        "reason",
        "scratch",
        "timeout",
        "of",
        "servers",
        "env",
        "path",
    }
)
#: A line that runs switchboard or curl: optional prompt, ``VAR=value`` words, a path;
#: not a line of output such as ``switchboard up: port 8000 ...`` (a word ending in ":").
COMMAND_LINE = re.compile(
    r"^\s*(?:\$\s+)?(?:\w+=\S*\s+)*(?:\S*/)?(?:switchboard|curl)(?:$|\s+(?![\w-]+:(?:\s|$)))"
)

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*example:(?P<body>.*?)-->\s*$")
_PROMPT = "$ "


@dataclass(frozen=True)
class Marker:
    """``<!-- example: KIND key=value ... -->``: the kind and its attributes."""

    kind: str
    attributes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def get(self, name: str, default: str = "") -> str:
        return self.attributes.get(name, default)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is (1-based line of the opening fence), its info
    string's first word, its text (the fence's indentation removed) and its marker."""

    path: str
    line: int
    language: str
    text: str
    marker: Marker | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def needs_marker(self) -> bool:
        """A shell block, or any block holding a switchboard or curl command line."""
        if self.language in SHELL_LANGUAGES:
            return True
        return any(COMMAND_LINE.match(line) for line in self.text.splitlines())


@dataclass(frozen=True)
class Document:
    """Every fenced block of one file, and what is wrong with its markers."""

    blocks: tuple[Block, ...]
    problems: tuple[str, ...]

    def examples(self) -> list[Block]:
        """The blocks that need a marker or have one, in document order."""
        return [block for block in self.blocks if block.needs_marker or block.marker]


def parse_marker(body: str) -> Marker:
    """The marker whose comment text (after ``example:``) is ``body``; ValueError on an
    empty one, an unknown kind or attribute, a word that is not ``key=value``, or a
    ``check`` without its ``reason=``."""
    words = shlex.split(body)
    if not words:
        raise ValueError("a marker names its kind: run, console, serve, check, output or file")
    kind, *rest = words
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(sorted(KINDS))})")
    attributes: dict[str, str] = {}
    for word in rest:
        name, equals, value = word.partition("=")
        if not equals:
            raise ValueError(f"{word!r} is not key=value")
        if name not in ATTRIBUTES:
            raise ValueError(f"unknown attribute {name!r} (one of {', '.join(sorted(ATTRIBUTES))})")
        attributes[name] = value
    if kind == "check" and not attributes.get("reason"):
        raise ValueError('a check marker says why the block cannot run: reason="..."')
    return Marker(kind, MappingProxyType(attributes))


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def extract(path: str, text: str) -> Document:
    """Every fenced block of the Markdown ``text`` (named ``path`` in messages)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    pending: tuple[int, Marker] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        marker_match = _MARKER.match(line)
        fence_match = _FENCE.match(line)
        if pending is not None and fence_match is None:
            problems.append(f"{path}:{pending[0]}: marker with no fenced block right after it")
            pending = None
        if marker_match is not None:
            try:
                pending = (index + 1, parse_marker(marker_match.group("body")))
            except ValueError as error:
                problems.append(f"{path}:{index + 1}: bad marker: {error}")
                pending = None
            index += 1
            continue
        if fence_match is None:
            index += 1
            continue
        indent, fence = len(fence_match.group("indent")), fence_match.group("fence")
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = [
            row[indent:] if not row[:indent].strip() else row.lstrip()
            for row in lines[index + 1 : end]
        ]
        info = fence_match.group("info").split()
        marker = pending[1] if pending is not None else None
        blocks.append(Block(path, index + 1, info[0] if info else "", "\n".join(body), marker))
        pending = None
        index = end + 1
    if pending is not None:
        problems.append(f"{path}:{pending[0]}: marker with no fenced block right after it")
    return Document(tuple(blocks), tuple(problems))


def command_lines(text: str) -> list[str]:
    """The commands of a script block: backslash continuations joined, blank lines and
    lines that are only a comment left out."""
    commands: list[str] = []
    current = ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        commands.append(current + line)
        current = ""
    if current:
        commands.append(current)
    return commands


@dataclass(frozen=True)
class ConsoleStep:
    """One ``$ command`` of a console block and the output the doc shows after it."""

    command: str
    expected: str


def console_steps(text: str) -> list[ConsoleStep]:
    """The steps of a console block: each line starting ``$ `` is a command (continued on
    the next lines while it ends with a backslash), the lines up to the next one its
    output (trailing blank lines dropped). Text before the first prompt is a ValueError."""
    steps: list[tuple[str, list[str]]] = []
    continuing = False
    for line in text.splitlines():
        if continuing:
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
            continuing = line.endswith("\\")
        elif line.startswith(_PROMPT):
            steps.append((line[len(_PROMPT) :], []))
            continuing = line.endswith("\\")
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console text before the first '$ ' prompt: {line!r}")
    return [ConsoleStep(command, "\n".join(output).rstrip()) for command, output in steps]
