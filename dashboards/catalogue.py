"""The metric catalogue (``docs/metrics.md``) as data, and the metric and label names a
PromQL expression uses, so a test can hold every dashboard query to the catalogue.

The catalogue's metric tables have the header ``| name | type | labels | meaning |``;
each row names one family in backticks, its type, and its labels in backticks. A
histogram family ``x`` is queried as ``x_bucket`` (with the extra label ``le``), ``x_sum``
and ``x_count``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dashboards import REPO_ROOT

__all__ = [
    "CATALOGUE_PATH",
    "Family",
    "label_names",
    "legend_labels",
    "load_catalogue",
    "metric_names",
    "series_names",
]

CATALOGUE_PATH = REPO_ROOT / "docs" / "metrics.md"
_HEADER = re.compile(r"^\|\s*name\s*\|\s*type\s*\|\s*labels\s*\|")
_TICKED = re.compile(r"`([^`]+)`")
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_METRIC = re.compile(r"\bswitchboard_[A-Za-z0-9_:]*")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_SELECTOR = re.compile(r"\{([^}]*)\}")
_LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Family:
    """One catalogued metric family: its name, type and label names."""

    name: str
    type: str
    labels: frozenset[str]


def load_catalogue(path: Path = CATALOGUE_PATH) -> dict[str, Family]:
    """Every family the catalogue lists, by name. Raises ``ValueError`` when it lists
    none (a reformatted page must not make every check pass vacuously) or one twice."""
    families: dict[str, Family] = {}
    in_table = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _HEADER.match(line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not in_table or len(cells) < 3 or set(cells[0]) <= {"-", ":", " "}:
            continue
        names = _TICKED.findall(cells[0])
        if names:
            if names[0] in families:
                raise ValueError(f"{names[0]} is catalogued twice in {path}")
            labels = frozenset(_TICKED.findall(cells[2]))
            families[names[0]] = Family(names[0], cells[1].lower(), labels)
    if not families:
        raise ValueError(f"no metric tables found in {path}")
    return families


def series_names(families: dict[str, Family]) -> dict[str, Family]:
    """Every name a query may use, mapped to its family (histograms add their
    ``_bucket``, ``_sum`` and ``_count`` series)."""
    names = dict(families)
    for family in families.values():
        if family.type == "histogram":
            names.update({family.name + suffix: family for suffix in _HISTOGRAM_SUFFIXES})
    return names


def metric_names(expr: str) -> set[str]:
    """The ``switchboard_*`` metric names ``expr`` uses (quoted strings ignored)."""
    return set(_METRIC.findall(_STRING.sub('""', expr)))


def label_names(expr: str) -> set[str]:
    """The label names ``expr`` groups or matches by (``by (…)``, ``on (…)``,
    ``{label="…"}``, …)."""
    unquoted = _STRING.sub('""', expr)
    found: set[str] = set()
    for group in _GROUPING.findall(unquoted):
        found.update(name.strip() for name in group.split(",") if name.strip())
    for selector in _SELECTOR.findall(unquoted):
        found.update(_MATCHER_LABEL.findall(selector))
    return found


def legend_labels(legend_format: str) -> set[str]:
    """The labels a Grafana legend format (``{{route}} …``) interpolates."""
    return set(_LEGEND_LABEL.findall(legend_format))
