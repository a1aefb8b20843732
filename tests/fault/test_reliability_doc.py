"""docs/reliability.md's results are the committed fault-suite run's figures, rendered.

Cheap and pure (no stack): the doc must hold exactly what
``tests/fault/harness/reliability_table.py`` renders from
``docs/figures/fault_figures.jsonl``, the file must hold both engines' runs of the faults
that run on both, and the renderer is checked on lines made here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fault.harness.reliability_table import DOC, MARKERS, read_lines, render, rewrite

#: Faults the suite runs on both engines: the built-in one's title, then the llama one's.
BOTH_ENGINES = (
    ("SIGKILL engine", "SIGKILL engine"),
    ("soak 60 s at half peak", "soak 30 s at 6 requests/s"),
    ("pause/continue storm with worker and router SIGKILL", "pause/continue storm under load"),
)


def test_the_doc_holds_the_committed_figures() -> None:
    """docs/reliability.md between its markers is exactly the committed file rendered."""
    doc = DOC.read_text(encoding="utf-8")
    assert rewrite(doc, render(read_lines())) == doc, (
        "docs/reliability.md's results are stale: run "
        "python -m tests.fault.harness.reliability_table --write"
    )


def test_the_committed_run_has_both_engines_and_nothing_wrong() -> None:
    """The committed file holds each two-engine fault for both, with no wrong or hung."""
    lines = {(entry["test"], entry.get("engine", "sim")): entry for entry in read_lines()}
    for built_in, llama in BOTH_ENGINES:
        assert (built_in, "sim") in lines, (built_in, sorted(lines))
        assert (llama, "llama-cpp") in lines, (llama, sorted(lines))
    for entry in lines.values():
        for group, tally in entry.get("counts", {}).items():
            assert tally.get("wrong text", 0) == 0 and tally.get("hung", 0) == 0, (entry, group)


def test_render_makes_one_row_per_test_and_engine(tmp_path: Path) -> None:
    """Rows carry the engine, the main group's counts and the shown values; a test
    reported twice on one engine keeps its last line."""
    lines = [
        {"test": "SIGKILL engine", "engine": "sim",
         "counts": {"all": {"ok": 5, "clear error": 2}},
         "values": {"restart_s": 0.8, "victim_pid": 7}},
        {"test": "SIGKILL engine", "engine": "llama-cpp",
         "counts": {"all": {"ok": 3, "clear error": 1}}, "values": {"restart_s": 1.25}},
        {"test": "soak 30 s", "engine": "llama-cpp",
         "counts": {"warm-up": {"ok": 1}, "soak": {"ok": 9, "hung": 0}},
         "values": {"kv_cells_used_after": 0, "agree": True}},
        {"test": "bad input: worker, malformed JSON", "counts": {},
         "values": {"statuses": {"400": 4}}},
    ]  # fmt: skip
    path = tmp_path / "figures.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [lines[0], *lines]))
    table = render(read_lines(path))
    assert "| SIGKILL engine | built-in | 7 | 5 | 2 | 0 | 0 | restart_s 0.8 |" in table
    assert "| SIGKILL engine | llama.cpp | 4 | 3 | 1 | 0 | 0 | restart_s 1.25 |" in table
    assert (
        "| soak 30 s | llama.cpp | 9 | 9 | 0 | 0 | 0 | kv_cells_used_after 0; agree yes |" in table
    )
    assert "| bad input: worker, malformed JSON | statuses {400: 4} |" in table
    assert table.count("SIGKILL engine") == 2


def test_rewrite_needs_the_markers() -> None:
    """Only the text between the markers is replaced; a doc without them is refused."""
    with pytest.raises(ValueError, match="markers"):
        rewrite("no markers here", "table")
    doc = f"a\n{MARKERS[0]}\nold\n{MARKERS[1]}\nb\n"
    assert rewrite(doc, "new") == f"a\n{MARKERS[0]}\nnew\n{MARKERS[1]}\nb\n"
    empty = f"a\n{MARKERS[0]}\n{MARKERS[1]}\nb\n"
    assert rewrite(empty, "new") == f"a\n{MARKERS[0]}\nnew\n{MARKERS[1]}\nb\n"
