"""``docs/http-api.md``'s field tables, generated from the request bodies themselves.

Each table lists every field an endpoint names (nested objects dotted:
``sampling_params.top_k``) with what the worker does with it, read off the model:

* **not supported** — marked :class:`~switchboard.worker.body_base.NotSupported`: only
  the default is accepted, any other value is a 400 saying what is missing;
* **ignored** — its description starts "accepted and ignored": taken, and dropped;
* **to the engine** — its description starts "passed to the engine": the llama.cpp
  engine applies it, the built-in one does not;
* **honoured** — the rest (a description starting "honoured" adds why).

``python -m switchboard.worker.field_table`` prints them, ``--write`` rewrites the doc
between each ``<!-- generated: fields <name> begin/end -->`` pair; a test holds the doc
to this module.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from switchboard.worker.body_base import Body, NotSupported
from switchboard.worker.chat_schemas import ChatBody, ChatMessage, ContentPart
from switchboard.worker.schemas import (
    CompletionBody,
    GenerateBody,
    NativeSamplingParams,
    ResponseFormat,
    StreamOptions,
)

__all__ = ["DOC", "TABLES", "render", "rewrite", "row_of"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
#: Each table's name and the bodies it lists, with the prefix of their fields.
TABLES: dict[str, list[tuple[type[Body], str]]] = {
    "generate": [(GenerateBody, ""), (NativeSamplingParams, "sampling_params.")],
    "completions": [
        (CompletionBody, ""),
        (StreamOptions, "stream_options."),
        (ResponseFormat, "response_format."),
    ],
    "chat": [
        (ChatBody, ""),
        (ChatMessage, "messages[]."),
        (ContentPart, "messages[].content[]."),
        (StreamOptions, "stream_options."),
        (ResponseFormat, "response_format."),
    ],
}
_STATUSES = (
    ("accepted and ignored", "ignored"),
    ("passed to the engine", "to the engine"),
    ("SGLang's; passed to the engine", "to the engine"),
    ("SGLang's; accepted and ignored", "ignored"),
    ("honoured", "honoured"),
)


def row_of(info: FieldInfo) -> tuple[str, str]:
    """``(status, note)`` of one field, as the module docstring says."""
    for mark in info.metadata:
        if isinstance(mark, NotSupported):
            return "not supported", mark.what
    description = info.description or ""
    for phrase, status in _STATUSES:
        if description.startswith(phrase):
            return status, description.removeprefix(phrase).lstrip(":; ").strip()
    return "honoured", description


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None or info.is_required():
        return "required" if info.is_required() else ""
    value: Any = info.default
    if value is None or isinstance(value, BaseModel):
        return ""
    return f"`{json.dumps(value)}`"


def render(name: str) -> str:
    """The table ``name`` of :data:`TABLES`, in Markdown."""
    lines = ["| field | default | what the worker does | note |", "| --- | --- | --- | --- |"]
    for model, prefix in TABLES[name]:
        for field_name, info in model.model_fields.items():
            status, note = row_of(info)
            shown = f"`{prefix}{field_name}`"
            lines.append(f"| {shown} | {_default(info)} | {status} | {note} |")
    return "\n".join(lines)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: fields {name} begin -->", f"<!-- generated: fields {name} end -->"


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    return lambda _: text


def rewrite(doc: str) -> str:
    """``doc`` with every table between its markers rendered afresh."""
    for name in TABLES:
        begin, end = _markers(name)
        pattern = re.compile(f"{re.escape(begin)}\n.*?{re.escape(end)}", re.DOTALL)
        if not pattern.search(doc):
            raise ValueError(f"the doc lacks the markers of the {name} table: {begin}")
        # A plain string as the replacement would have its backslashes read as escapes.
        doc = pattern.sub(_constant(f"{begin}\n{render(name)}\n{end}"), doc)
    return doc


def main(argv: list[str] | None = None) -> None:
    """Print the tables, or ``--write`` them into docs/http-api.md."""
    parser = argparse.ArgumentParser(
        prog="python -m switchboard.worker.field_table",
        description="docs/http-api.md's field tables, from the request bodies",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the doc's tables")
    args = parser.parse_args(argv)
    if args.write:
        DOC.write_text(rewrite(DOC.read_text(encoding="utf-8")), encoding="utf-8")
        return
    for name in TABLES:
        print(f"{name}:\n{render(name)}\n")


if __name__ == "__main__":
    main()
