"""Tests for dashboards.queries: ``panel_queries`` hands out runnable PromQL, variables
substituted."""

from __future__ import annotations

import pytest

from dashboards.queries import UnresolvedVariableError, iter_panels, panel_queries, substitute
from tests.unit.dashboards.committed import VARIABLES, load


class TestPanelQueries:
    def test_queries_come_with_variables_substituted(self) -> None:
        """``panel_queries`` returns every target, ``$worker`` and the rate interval filled in."""
        queries = panel_queries(load("switchboard-worker"), VARIABLES)
        targets = sum(len(panel["targets"]) for panel in iter_panels(load("switchboard-worker")))
        assert len(queries) == targets
        assert all("$" not in query.expr for query in queries)
        assert any('worker="w0"' in q.expr and "[1m]" in q.expr for q in queries)
        assert {query.dashboard for query in queries} == {"switchboard-worker"}

    def test_a_variable_without_value_is_an_error(self) -> None:
        """A query whose variable the caller did not give raises instead of passing ``$x`` on."""
        with pytest.raises(UnresolvedVariableError, match="worker"):
            panel_queries(load("switchboard-worker"), {"__rate_interval": "1m"})

    def test_substitution_syntaxes(self) -> None:
        """``$x``, ``${x}``, ``${x:format}`` and ``[[x]]`` are all substituted."""
        expr = 'a{w="$worker"} ${worker} ${worker:raw} [[worker]] [$__rate_interval]'
        assert substitute(expr, VARIABLES) == 'a{w="w0"} w0 w0 w0 [1m]'

    def test_panels_inside_collapsed_rows_are_listed(self) -> None:
        """Panels nested in a collapsed row count; rows themselves do not."""
        model = {
            "uid": "u",
            "panels": [
                {"type": "row", "title": "r", "panels": [{"title": "inner", "targets": []}]},
                {"type": "timeseries", "title": "outer", "targets": [{"expr": "x", "refId": "A"}]},
            ],
        }
        assert [panel["title"] for panel in iter_panels(model)] == ["inner", "outer"]
        assert panel_queries(model, {}) == [("u", "outer", "A", "x")]
