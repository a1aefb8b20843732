"""Tests for examples/echo_engine.py: docs/engine.md carries it verbatim."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


class TestDocExample:
    """docs/engine.md carries examples/echo_engine.py verbatim."""

    def test_doc_includes_the_example_verbatim(self) -> None:
        """The example file, exactly, is a python code block of the doc."""
        source = (REPO / "examples" / "echo_engine.py").read_text(encoding="utf-8")
        doc = (REPO / "docs" / "engine.md").read_text(encoding="utf-8")
        assert f"```python\n{source}```\n" in doc
