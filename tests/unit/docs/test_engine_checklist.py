"""One list of an engine's duties: protocol.md section 8 holds it, engine.md section 3
maps each item to the engine link, and the two name the same items in the same order."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"

#: What the brief of issue 22 asks the list to cover, each as an item's name.
COVERED = (
    "Sockets",
    "Stack key",
    "Inputs",
    "Bad input",
    "Load",
    "Pause and continue",
    "Operation order",
    "Duplicate requests",
    "Abort",
    "Stop rules",
    "End of sequence",
    "Rows",
    "Continuity",
    "Batches",
    "Embeddings",
    "Idle",
    "Freeze GC",
    "Trace context",
    "SIGTERM",
    "Parent",
)


def _checklist() -> str:
    text = (DOCS / "protocol.md").read_text(encoding="utf-8")
    start = text.index("\nEngine (the one list of an engine's duties")
    return text[start : text.index("\nWorker:\n", start)]


def _checklist_items() -> list[str]:
    return re.findall(r"^- \[ \] \*\*(.+?)\.\*\*", _checklist(), re.MULTILINE)


def _engine_md_items() -> list[str]:
    text = (DOCS / "engine.md").read_text(encoding="utf-8")
    section = text[text.index("\n## 3. ") : text.index("\n## 4. ")]
    return re.findall(r"^\| \*\*(.+?)\*\* \|", section, re.MULTILINE)


def test_every_checklist_item_is_named() -> None:
    """Each item of the engine checklist starts with its name in bold."""
    assert len(_checklist_items()) == _checklist().count("\n- [ ] ")


def test_engine_md_maps_the_same_items_in_the_same_order() -> None:
    assert _engine_md_items() == _checklist_items()


def test_the_list_covers_every_duty() -> None:
    assert set(COVERED) <= set(_checklist_items())


def test_the_items_name_their_fields() -> None:
    """Each duty quotes at least one field, kind or name in backticks."""
    items = _checklist().split("\n- [ ] ")[1:]
    assert all("`" in item for item in items)
