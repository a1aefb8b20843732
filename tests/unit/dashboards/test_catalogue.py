"""The Grafana dashboards: committed JSON equals what the code generates, it type-checks
against ``@grafana/schema``, every query stays within the metric catalogue, and
``panel_queries`` hands out runnable PromQL."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dashboards import JSON_DIR, REPO_ROOT
from dashboards.build import differences, main, write
from dashboards.catalogue import (
    label_names,
    legend_labels,
    load_catalogue,
    metric_names,
    series_names,
)
from dashboards.queries import UnresolvedVariableError, iter_panels, panel_queries, substitute
from dashboards.render import render_all
from dashboards.tscheck import missing_toolchain, typecheck
from tests.conftest import running_in_ci

UIDS = ("switchboard-overview", "switchboard-worker", "switchboard-latency")
VARIABLES = {"worker": "w0", "__rate_interval": "1m"}
#: Range selectors (``[…]``) of a PromQL expression.
RANGE = re.compile(r"\[([^\]]*)\]")


def load(uid: str) -> dict[str, Any]:
    """The committed JSON of dashboard ``uid``."""
    model: dict[str, Any] = json.loads((JSON_DIR / f"{uid}.json").read_text(encoding="utf-8"))
    return model


def all_models() -> list[dict[str, Any]]:
    return [load(uid) for uid in UIDS]


def require_toolchain() -> None:
    """Skip (locally) or fail (under CI=true) when node or the npm packages are missing."""
    reason = missing_toolchain()
    if reason is None:
        return
    if running_in_ci():
        pytest.fail(f"CI=true: the dashboard type check cannot run: {reason}")
    pytest.skip(reason)


class TestGeneration:
    def test_committed_json_matches_the_code(self) -> None:
        """Regenerating every dashboard from code reproduces the committed JSON byte for byte."""
        assert differences(JSON_DIR, render_all()) == []

    def test_check_flag_fails_on_stale_missing_or_extra_json(self, tmp_path: Path) -> None:
        """``--check`` exits 0 on fresh output and 1 once a file is edited, removed or added."""
        write(tmp_path, render_all())
        assert main(["--check", "--out", str(tmp_path)]) == 0
        edited = tmp_path / "switchboard-overview.json"
        edited.write_text(edited.read_text(encoding="utf-8").replace("Overview", "Overvue"))
        assert main(["--check", "--out", str(tmp_path)]) == 1
        write(tmp_path, render_all())
        (tmp_path / "switchboard-worker.json").unlink()
        assert main(["--check", "--out", str(tmp_path)]) == 1
        write(tmp_path, render_all())
        (tmp_path / "stray.json").write_text("{}")
        assert main(["--check", "--out", str(tmp_path)]) == 1

    def test_module_entry_point_checks_the_committed_json(self) -> None:
        """``python -m dashboards.build --check`` runs from the repository and passes."""
        result = subprocess.run(
            [sys.executable, "-m", "dashboards.build", "--check"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr

    def test_dashboards_have_stable_uids_and_unique_panel_ids(self) -> None:
        """Each dashboard keeps its uid, and panel ids are unique within it."""
        for uid in UIDS:
            model = load(uid)
            assert model["uid"] == uid
            ids = [panel["id"] for panel in model["panels"]]
            assert len(ids) == len(set(ids)), uid

    def test_sdk_quirks_are_fixed(self) -> None:
        """No ``"options": null`` panel, no placeholder variable ids, annotations have a list."""
        for model in all_models():
            for panel in model["panels"]:
                assert panel.get("options", {}) is not None, panel["title"]
            for variable in model["templating"]["list"]:
                assert "id" not in variable
                assert "auto" not in variable
            assert model["annotations"]["list"] == []


class TestTypeCheck:
    def test_dashboards_type_check_against_grafana_schema(self) -> None:
        """``tsc --strict`` accepts every committed dashboard as a ``@grafana/schema`` Dashboard."""
        require_toolchain()
        result = typecheck(sorted(JSON_DIR.glob("*.json")))
        assert result.returncode == 0, result.stdout + result.stderr

    def test_type_check_catches_wrong_types_and_unknown_keys(self, tmp_path: Path) -> None:
        """A string grid height, an unknown enum value and a misspelt key each fail the check."""
        require_toolchain()
        model = load("switchboard-overview")
        breakages = {
            "height": lambda panel: panel["gridPos"].update(h="8"),
            "enum": lambda panel: panel["fieldConfig"]["defaults"].update(
                thresholds={"mode": "absolutely", "steps": []}
            ),
            "key": lambda panel: panel.update(titel="typo"),
        }
        paths = []
        for name, breakage in breakages.items():
            broken = copy.deepcopy(model)
            breakage(broken["panels"][1])
            path = tmp_path / f"broken-{name}.json"
            path.write_text(json.dumps(broken), encoding="utf-8")
            paths.append(path)
        output = typecheck(paths).stdout
        for name in breakages:
            assert f"broken-{name}.ts" in output, output


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
