"""Every panel query of a dashboard, with template variables substituted, ready to send
to a real Prometheus (``/api/v1/query``).

>>> panel_queries(model, {"worker": "w0", "__rate_interval": "1m"})[0]
PanelQuery(dashboard='switchboard-worker', panel='Up', ref_id='A',
           expr='switchboard_worker_up{worker="w0"}')
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

__all__ = ["PanelQuery", "UnresolvedVariableError", "iter_panels", "panel_queries", "substitute"]

#: ``$name``, ``${name}``, ``${name:format}`` and the deprecated ``[[name]]``.
_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)\]\]")


class UnresolvedVariableError(ValueError):
    """A query uses a template variable the caller gave no value for."""


class PanelQuery(NamedTuple):
    """One target of one panel: the dashboard's uid, the panel title, the target's ref id
    and its PromQL with every variable substituted."""

    dashboard: str
    panel: str
    ref_id: str
    expr: str


def substitute(expr: str, variables: Mapping[str, str]) -> str:
    """``expr`` with every template variable replaced by its value in ``variables``
    (keys without the ``$``, e.g. ``"worker"``, ``"__rate_interval"``). Raises
    :class:`UnresolvedVariableError` naming a variable ``variables`` lacks."""

    def value(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group is not None)
        if name not in variables:
            raise UnresolvedVariableError(f"no value for ${name} in {expr!r}")
        return variables[name]

    return _VARIABLE.sub(value, expr)


def iter_panels(model: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every panel of a dashboard model except rows, including panels inside collapsed
    rows, in layout order."""
    for panel in model.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def panel_queries(model: Mapping[str, Any], variables: Mapping[str, str]) -> list[PanelQuery]:
    """Every PromQL target (hidden ones excepted) of every panel of the dashboard
    ``model`` (its JSON, parsed), with ``variables`` substituted."""
    uid = str(model.get("uid", ""))
    return [
        PanelQuery(uid, str(panel.get("title", "")), str(target.get("refId", "")), expr)
        for panel in iter_panels(model)
        for target in panel.get("targets", [])
        if "expr" in target and not target.get("hide", False)
        for expr in [substitute(str(target["expr"]), variables)]
    ]
