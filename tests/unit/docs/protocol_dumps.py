"""The byte dumps of docs/protocol.md, section 9: found, parsed and written. Pure.

A dump is a fenced block right after a marker line::

    <!-- dump: NAME encoder=ENCODER [kind=KIND] [from="OTHER NAME"] -->

holding one *section* per frame. A section is an optional ``frame N (B bytes)`` lead,
then the frame's decoded value as JSON (a batch row's may start ``row N:``), then its
bytes as hex lines (``0000  97 1f ...  ascii``)::

    frame 0 (16 bytes)  [31, [], [], 1700000000000000000, "", "", []]
    0000  97 1f 90 90 cf 17 97 9c fe 36 2a 00 00 a0 a0 90  .........6*.....

:func:`dumps` finds every marked block of a document's section 9; :func:`render` writes
a section the way the doc shows it (what generated the doc's dumps).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Dump", "Section", "dumps", "hex_lines", "render", "section_text"]

_MARKER = re.compile(r"^<!--\s*dump:(?P<body>.*?)-->\s*$")
_FRAME = re.compile(r"^frame (?P<index>\d+) \((?P<size>\d+) bytes\)\s*(?P<rest>.*)$")
_HEX = re.compile(r"^(?P<offset>[0-9a-f]{4})  (?P<bytes>[0-9a-f]{2}(?: [0-9a-f]{2}){0,15})(?:  |$)")
_ROW = re.compile(r"^row \d+:\s*")
#: A byte sequence an annotation quotes: two or more hex pairs in backticks.
_QUOTED = re.compile(r"`((?:[0-9a-f]{2} )+[0-9a-f]{2})`")


@dataclass(frozen=True)
class Section:
    """One frame of a dump: its number and size when the doc states them, the JSON value
    it states, and the bytes."""

    index: int | None
    size: int | None
    value: Any
    data: bytes


@dataclass(frozen=True)
class Dump:
    """A marked dump: its name, marker attributes, line, sections and the byte sequences
    the paragraph after it quotes (``Bytes: `97` array of 7, ...``)."""

    name: str
    attributes: dict[str, str]
    line: int
    sections: list[Section]
    quoted: list[bytes] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"docs/protocol.md:{self.line} ({self.name})"


def _section_9(lines: list[str]) -> tuple[int, int]:
    start = next(i for i, line in enumerate(lines) if line.startswith("## 9. "))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return start, end


def dumps(text: str) -> list[Dump]:
    """Every marked dump of section 9 of ``text``, in document order."""
    lines = text.splitlines()
    start, end = _section_9(lines)
    found: list[Dump] = []
    index = start
    while index < end:
        marker = _MARKER.match(lines[index])
        if marker is None:
            index += 1
            continue
        words = shlex.split(marker.group("body"))
        name_words = [w for w in words if "=" not in w]
        attributes = dict(w.split("=", 1) for w in words if "=" in w)
        if lines[index + 1].strip() != "```":
            raise ValueError(f"line {index + 1}: a dump marker needs a plain ``` block after it")
        close = next(i for i in range(index + 2, end) if lines[i].strip() == "```")
        sections = _sections(lines[index + 2 : close], index + 3)
        after = close + 1
        while after < end and not lines[after].strip():
            after += 1
        paragraph: list[str] = []
        while after < end and lines[after].strip() and not _MARKER.match(lines[after]):
            paragraph.append(lines[after])
            after += 1
        quoted = []
        if paragraph and re.match(r"^(Header bytes|Bytes)\b", paragraph[0]):
            quoted = [bytes.fromhex(q) for q in _QUOTED.findall(" ".join(paragraph))]
        found.append(Dump(" ".join(name_words), attributes, index + 1, sections, quoted))
        index = close + 1
    return found


def _sections(block: list[str], first_line: int) -> list[Section]:
    sections: list[Section] = []
    lead: list[str] = []
    frame: re.Match[str] | None = None
    data = bytearray()
    for number, line in enumerate([*block, ""], start=first_line):
        hex_line = _HEX.match(line)
        if hex_line is not None:
            if int(hex_line.group("offset"), 16) != len(data):
                raise ValueError(
                    f"line {number}: offset {hex_line.group('offset')} after {len(data)} bytes"
                )
            data += bytes.fromhex(hex_line.group("bytes"))
            continue
        if data:  # the section's bytes ended
            sections.append(_section(frame, lead, bytes(data), number))
            lead, frame, data = [], None, bytearray()
        if not line.strip():
            continue
        match = _FRAME.match(line)
        if match is not None:
            frame = match
        text = line if match is None else match.group("rest")
        if text.strip():
            lead.append(text.strip())
    if lead or frame is not None:
        raise ValueError(f"line {first_line}: a section without bytes")
    return sections


def _section(frame: re.Match[str] | None, lead: list[str], data: bytes, line: int) -> Section:
    text = _ROW.sub("", " ".join(lead))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"near line {line}: the value a dump states is not JSON: {error}"
        ) from None
    if frame is None:
        return Section(None, None, value, data)
    return Section(int(frame.group("index")), int(frame.group("size")), value, data)


def hex_lines(data: bytes) -> list[str]:
    """``data`` as the doc's hex lines: offset, 16 bytes, their printable ASCII."""
    out = []
    for offset in range(0, len(data), 16):
        chunk = data[offset : offset + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{offset:04x}  {chunk.hex(' '):<47}  {text}".rstrip())
    return out


def section_text(value: Any) -> str:
    """The JSON a section states: compact spacing, as the doc writes it."""
    return json.dumps(value, ensure_ascii=False)


def render(index: int | None, value: Any, data: bytes, prefix: str = "", width: int = 90) -> str:
    """A section as the doc shows it (``frame N (B bytes)  value``, then the hex lines),
    the value wrapped at ``", "`` to ``width`` columns (the parser joins the lines with
    one space, which gives the JSON back)."""
    head = "" if index is None else f"frame {index} ({len(data)} bytes)  "
    indent = " " * len(head)
    lines, line = [], head + prefix
    for i, part in enumerate(section_text(value).split(", ")):
        piece = part if i == 0 else " " + part
        if i and len(line) + len(piece) + 1 > width:
            lines.append(line + ",")
            line = indent + part
        else:
            line += ("," if i else "") + piece
    lines.append(line)
    return "\n".join([*lines, *hex_lines(data)])
