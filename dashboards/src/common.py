"""Building blocks shared by every dashboard: the data source variable, PromQL helpers
and the panel kinds the dashboards use.

Every panel is bound to the ``datasource`` template variable (type ``prometheus``), so a
dashboard works on any Grafana with any Prometheus data source. Every rate uses
``$__rate_interval`` so it stays correct for any scrape interval. Every panel helper
requires a title, a description and a unit: an on-call engineer reading a panel at 3 a.m.
should not have to guess what it measures.
"""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, statetimeline, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
    VariableRefresh,
    VariableSort,
)

__all__ = [
    "DATASOURCE",
    "MESSAGES_PER_SECOND",
    "TOKENS_PER_SECOND",
    "base_dashboard",
    "quantile",
    "rate_by",
    "stat_panel",
    "state_panel",
    "target",
    "timeseries_panel",
    "up_down_mappings",
    "worker_variable",
]

#: Every panel and variable queries the data source the ``datasource`` variable selects.
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
#: Grafana custom units (``suffix:``) for rates that have no built-in unit.
MESSAGES_PER_SECOND = "suffix: msg/s"
TOKENS_PER_SECOND = "suffix: tok/s"
#: Tag shared by the dashboards; the dashboard links menu lists dashboards by it.
TAG = "switchboard"


def rate_by(metric: str, labels: str, selector: str = "") -> str:
    """``sum by (labels) (rate(metric{selector}[$__rate_interval]))``; empty ``labels``
    sums everything into one series."""
    grouping = f" by ({labels})" if labels else ""
    return f"sum{grouping} (rate({metric}{selector}[$__rate_interval]))"


def quantile(q: float, histogram: str, labels: str = "", selector: str = "") -> str:
    """The ``q`` quantile of ``histogram`` (a family name, without ``_bucket``) over the
    rate interval, one series per combination of ``labels``."""
    grouping = f"le, {labels}" if labels else "le"
    buckets = rate_by(f"{histogram}_bucket", grouping, selector)
    return f"histogram_quantile({q}, {buckets})"


def target(expr: str, legend: str, ref_id: str = "A") -> prometheus.Dataquery:
    """A range query for ``expr`` named by ``legend`` (Grafana's ``{{label}}`` syntax)."""
    return (
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(ref_id)
        .range()
        .datasource(DATASOURCE)
    )


def _targets(
    queries: Sequence[tuple[str, str]],
) -> list[cogbuilder.Builder[cogvariants.Dataquery]]:
    """Targets for ``(expr, legend)`` pairs with ref ids A, B, C, …"""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(queries)]


def timeseries_panel(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[tuple[str, str]],
    *,
    span: int = 12,
    height: int = 8,
    stacked: bool = False,
) -> timeseries.Panel:
    """A time series panel for ``(expr, legend)`` queries; ``stacked`` stacks the series
    (for parts of a whole, e.g. workers by state)."""
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .span(span)
        .height(height)
        .fill_opacity(10)
        .line_width(1)
        .show_points(common.VisibilityMode.NEVER)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
    )
    if stacked:
        panel = panel.stacking(
            common_builders.StackingConfig().mode(common.StackingMode.NORMAL)
        ).fill_opacity(40)
    return panel


def _reduce_last() -> common_builders.ReduceDataOptions:
    """Show the last non-null value of each series."""
    return common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def stat_panel(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[tuple[str, str]],
    *,
    span: int = 6,
    height: int = 4,
    thresholds: Sequence[tuple[float | None, str]] = ((None, "green"),),
    mappings: Sequence[ValueMap] = (),
) -> stat.Panel:
    """A single-value panel showing each query's latest value, coloured by ``thresholds``
    (``(lower bound, colour)`` steps; the first bound is ``None``, i.e. -infinity)."""
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .span(span)
        .height(height)
        .reduce_options(_reduce_last())
        .graph_mode(common.BigValueGraphMode.AREA)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .text_mode(common.BigValueTextMode.AUTO)
        .justify_mode(common.BigValueJustifyMode.AUTO)
        .orientation(common.VizOrientation.AUTO)
        .thresholds(_thresholds(thresholds))
        .mappings(list(mappings))
    )


def state_panel(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[tuple[str, str]],
    mappings: Sequence[ValueMap],
    *,
    span: int = 12,
    height: int = 6,
) -> statetimeline.Panel:
    """A state timeline: each series as bands coloured and named by ``mappings``."""
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .span(span)
        .height(height)
        .mappings(list(mappings))
        .show_value(common.VisibilityMode.AUTO)
        .merge_values(True)
        .row_height(0.9)
        .fill_opacity(70)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.SINGLE))
    )


def _thresholds(steps: Sequence[tuple[float | None, str]]) -> dashboard.ThresholdsConfig:
    return (
        dashboard.ThresholdsConfig()
        .mode(ThresholdsMode.ABSOLUTE)
        .steps([Threshold(value=value, color=colour) for value, colour in steps])
    )


def up_down_mappings(up: str, down: str) -> list[ValueMap]:
    """Name 1 ``up`` (green) and 0 ``down`` (red)."""
    return [
        ValueMap(
            {
                "1": ValueMappingResult(text=up, color="green", index=0),
                "0": ValueMappingResult(text=down, color="red", index=1),
            }
        )
    ]


def worker_variable() -> dashboard.QueryVariable:
    """The ``worker`` variable: one worker id, chosen among those the router reports."""
    return (
        dashboard.QueryVariable("worker")
        .label("Worker")
        .description("The worker to drill into (workers the tokenizer router reports).")
        .datasource(DATASOURCE)
        .query("label_values(switchboard_worker_up, worker)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(False)
        .include_all(False)
    )


def base_dashboard(uid: str, title: str, description: str) -> dashboard.Dashboard:
    """A dashboard with Switchboard's defaults: the stable ``uid``, the ``datasource``
    variable, the last hour refreshed every 30 s, a shared crosshair and a menu linking
    the other Switchboard dashboards (keeping time range and variables)."""
    return (
        dashboard.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .editable()
        .timezone("browser")
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .with_variable(
            dashboard.DatasourceVariable("datasource")
            .label("Data source")
            .description("The Prometheus that scrapes the admin app's /metrics.")
            .type("prometheus")
        )
        .link(
            dashboard.DashboardLink("Switchboard")
            .type(DashboardLinkType.DASHBOARDS)
            .tags([TAG])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
            .target_blank(False)
            .icon("external link")
            .tooltip("")
            .url("")
        )
    )
