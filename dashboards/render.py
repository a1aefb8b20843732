"""Turn a ``grafana-foundation-sdk`` dashboard builder into the JSON Grafana imports.

The SDK's output needs a few fixes before Grafana (and ``@grafana/schema``) accept it
cleanly; :func:`render` applies them, so a dashboard module never has to:

* every panel gets a unique ``id`` (the SDK leaves ids at 0 or unset), numbered in order;
* a panel without options drops ``"options": null`` (Grafana expects an object or none);
* ``repeatDirection`` is dropped from panels that do not repeat;
* template variables drop the SDK's placeholder ``id`` and the interval-only ``auto*``
  keys, which ``VariableModel`` does not have;
* ``annotations`` always has a ``list`` (Grafana reads ``annotations.list`` on load);
* the dashboard drops ``style`` (gone from the schema; the viewer's theme applies).

:func:`to_text` is the one serialisation (sorted keys, two-space indent, final newline),
so regenerating is byte-for-byte stable.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders.dashboard import Dashboard
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from dashboards.src import DASHBOARDS

__all__ = ["render", "render_all", "to_text"]

#: Keys the SDK puts on every variable that only interval variables have.
_INTERVAL_ONLY_KEYS = ("auto", "auto_count", "auto_min")


def render(board: Dashboard) -> dict[str, Any]:
    """The dashboard ``board`` builds, as a JSON-able dict ready for Grafana."""
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    next_id = 1
    for panel in model.get("panels", []):
        for member in [panel, *panel.get("panels", [])]:
            member["id"] = next_id
            next_id += 1
            _fix_panel(member)
    for variable in model.get("templating", {}).get("list", []):
        _fix_variable(variable)
    model.setdefault("annotations", {}).setdefault("list", [])
    model.pop("style", None)
    return model


def _fix_panel(panel: dict[str, Any]) -> None:
    if panel.get("options", {}) is None:
        del panel["options"]
    if "repeat" not in panel:
        panel.pop("repeatDirection", None)


def _fix_variable(variable: dict[str, Any]) -> None:
    variable.pop("id", None)
    if variable.get("type") != "interval":
        for key in _INTERVAL_ONLY_KEYS:
            variable.pop(key, None)


def to_text(model: dict[str, Any]) -> str:
    """The committed text of a rendered dashboard."""
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_all() -> dict[str, str]:
    """Every dashboard's committed text, by file name (``<uid>.json``)."""
    return {f"{uid}.json": to_text(render(factory())) for uid, factory in DASHBOARDS.items()}
