"""Tests for dashboards.catalogue: its tables and scanners, and every committed query
staying within the metric catalogue (metrics, labels, rate interval, data source)."""

from __future__ import annotations

import re

from dashboards.catalogue import (
    label_names,
    legend_labels,
    load_catalogue,
    metric_names,
    series_names,
)
from dashboards.queries import iter_panels, panel_queries, substitute
from tests.unit.dashboards.committed import VARIABLES, all_models, load

#: Range selectors (``[…]``) of a PromQL expression.
RANGE = re.compile(r"\[([^\]]*)\]")


class TestCatalogue:
    def test_catalogue_tables_are_read(self) -> None:
        """The catalogue parser finds families with their types and labels."""
        families = load_catalogue()
        hop = families["switchboard_hop_latency_seconds"]
        assert (hop.type, hop.labels) == ("histogram", frozenset({"route"}))
        assert families["switchboard_paused"].labels == frozenset()
        assert "switchboard_hop_latency_seconds_bucket" in series_names(families)
        assert "switchboard_paused_bucket" not in series_names(families)

    def test_scanners_see_metrics_and_labels(self) -> None:
        """The expression scanners find metric and label names and ignore quoted values."""
        expr = 'sum by (le, route) (rate(switchboard_x_bucket{worker="switchboard_y"}[1m]))'
        assert metric_names(expr) == {"switchboard_x_bucket"}
        assert label_names(expr) == {"le", "route", "worker"}
        assert legend_labels("p99 {{route}} {{ worker }}") == {"route", "worker"}

    def test_every_query_uses_catalogued_metrics(self) -> None:
        """Every panel query names at least one metric, and only metrics docs/metrics.md lists."""
        known = series_names(load_catalogue())
        for model in all_models():
            for query in panel_queries(model, VARIABLES):
                used = metric_names(query.expr)
                assert used, query
                assert used <= set(known), (query, used - set(known))

    def test_every_query_uses_labels_its_metrics_have(self) -> None:
        """Grouping, matcher and legend labels all belong to the metrics a query reads."""
        known = series_names(load_catalogue())
        for model in all_models():
            for panel in iter_panels(model):
                for target in panel["targets"]:
                    expr = substitute(target["expr"], VARIABLES)
                    used = metric_names(expr)
                    allowed = {label for name in used for label in known[name].labels}
                    if any(name.endswith("_bucket") for name in used):
                        allowed.add("le")
                    labels = label_names(expr) | legend_labels(target.get("legendFormat", ""))
                    assert labels <= allowed, (panel["title"], expr, labels - allowed)

    def test_every_panel_has_title_description_and_unit(self) -> None:
        """Every panel says what it shows and in which unit."""
        for model in all_models():
            for panel in iter_panels(model):
                assert panel.get("title"), panel
                assert panel.get("description"), panel["title"]
                assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]

    def test_every_rate_uses_the_rate_interval(self) -> None:
        """Every range selector is ``$__rate_interval``, right for any scrape interval."""
        for model in all_models():
            for panel in iter_panels(model):
                for target in panel["targets"]:
                    assert set(RANGE.findall(target["expr"])) <= {"$__rate_interval"}, target

    def test_every_query_reads_the_datasource_variable(self) -> None:
        """Panels and targets use the ``datasource`` variable, a Prometheus data source."""
        for model in all_models():
            variables = {var["name"]: var for var in model["templating"]["list"]}
            assert variables["datasource"]["type"] == "datasource"
            assert variables["datasource"]["query"] == "prometheus"
            for panel in iter_panels(model):
                for holder in [panel, *panel["targets"]]:
                    assert holder["datasource"] == {"type": "prometheus", "uid": "${datasource}"}

    def test_worker_dashboard_is_about_one_worker(self) -> None:
        """The drill-down's ``worker`` variable lists workers, and every query filters by it."""
        model = load("switchboard-worker")
        variable = next(v for v in model["templating"]["list"] if v["name"] == "worker")
        assert variable["query"] == "label_values(switchboard_worker_up, worker)"
        for panel in iter_panels(model):
            for target in panel["targets"]:
                assert 'worker="$worker"' in target["expr"], panel["title"]
