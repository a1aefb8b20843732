"""The README's control-client example is ``examples/pause_and_continue.py`` verbatim
(the docs test runs the README's copy against a stack; this keeps the file the same)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_readme_shows_the_example_file() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(
        r"<!-- example: file path=examples/pause_and_continue.py -->\n```python\n(.*?)```",
        readme,
        re.S,
    )
    assert found is not None, "README.md: the control example's block is missing"
    assert found.group(1) == (REPO / "examples/pause_and_continue.py").read_text(encoding="utf-8")
