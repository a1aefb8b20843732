"""Whether a command's output still matches the output a doc shows: pure comparison.

The doc shows one run; the test makes another. Between the two, what may differ is what
changes from run to run: numbers (pids, counts, ports, sizes), clock times, durations,
operation ids, tokens and column widths. :func:`normalize` maps each to a placeholder
and collapses runs of spaces, so what remains is the shape: the wording, the columns and
their order, the rows, the field names. A JSON answer (the doc may wrap it over lines)
is compared as JSON: its keys, their order and every value normalized the same way.

:func:`mismatch` returns None when the two agree, else a diff that explains itself.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

__all__ = ["mismatch", "normalize", "normalize_line"]

#: Applied in order; each placeholder is left alone by the patterns after it.
_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    # a stack token: hex, or a doc's shortened one ("q8Zr…")
    (re.compile(r"\b[0-9a-f]{32,}\b|[\w-]*…"), "<token>"),
    # an operation id: <incarnation ns>-<seq>
    (re.compile(r"\b\d{12,}-\d+\b"), "<op-id>"),
    # a date and clock time (log lines), then a clock time alone
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<time>"),
    # a duration: 0.003s, 1m05s, 1h02m, 250ms
    (re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?(?:h|ms|m|s)){1,3}(?![\w.])"), "<duration>"),
    # any other number, not one inside a name (w0) or a version (0.1.0)
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def normalize_line(line: str) -> str:
    """One line with its volatile fields as placeholders and its spacing collapsed."""
    for pattern, placeholder in _VOLATILE:
        line = pattern.sub(placeholder, line)
    return _SPACES.sub(" ", line).strip()


def _normalize_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _normalize_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalize_json(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return "<n>"
    return normalize_line(str(value))


def _as_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def normalize(text: str) -> list[str]:
    """The comparable lines of ``text``: a JSON value as one line of normalized JSON
    (key order kept), any other text line by line, blank lines dropped."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and (parsed := _as_json(stripped)) is not None:
        return [json.dumps(_normalize_json(parsed))]
    return [normalized for line in text.splitlines() if (normalized := normalize_line(line))]


def mismatch(expected: str, actual: str) -> str | None:
    """None when ``actual`` matches the ``expected`` output a doc shows, else a diff of
    the normalized lines (``-`` the doc, ``+`` the run) followed by the raw output."""
    want, got = normalize(expected), normalize(actual)
    if want == got:
        return None
    diff = "\n".join(difflib.unified_diff(want, got, "the doc", "the run", lineterm="", n=2))
    return f"{diff}\n--- the run's output, as it was:\n{actual.rstrip()}"
