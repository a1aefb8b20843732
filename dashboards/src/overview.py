"""The overview dashboard (uid ``switchboard-overview``): is the stack serving, how much
flows on each route and through each worker, what is dropped or refused, how long hops
take, when generation was paused, and how loaded the engine is."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard
from grafana_foundation_sdk.models.dashboard import ValueMap, ValueMappingResult

from dashboards.src.common import (
    MESSAGES_PER_SECOND,
    TOKENS_PER_SECOND,
    base_dashboard,
    quantile,
    rate_by,
    stat_panel,
    state_panel,
    timeseries_panel,
    up_down_mappings,
)

__all__ = ["UID", "overview"]

UID = "switchboard-overview"
HOP = "switchboard_hop_latency_seconds"


def _paused_mappings() -> list[ValueMap]:
    return [
        ValueMap(
            {
                "0": ValueMappingResult(text="generating", color="green", index=0),
                "1": ValueMappingResult(text="paused", color="orange", index=1),
            }
        )
    ]


def _status_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Status"))
        .with_panel(
            stat_panel(
                "Workers serving",
                "Workers registered with the tokenizer router and serving (state `serving`).",
                "short",
                [('switchboard_workers{state="serving"}', "serving")],
                thresholds=((None, "red"), (1, "green")),
            )
        )
        .with_panel(
            stat_panel(
                "Generation",
                "Whether generation is paused (switchboard_paused).",
                "none",
                [("switchboard_paused", "paused")],
                mappings=_paused_mappings(),
            )
        )
        .with_panel(
            stat_panel(
                "Engine",
                "Whether the engine sent an event within the engine timeout.",
                "none",
                [("switchboard_engine_up", "engine")],
                mappings=up_down_mappings("up", "down"),
            )
        )
        .with_panel(
            stat_panel(
                "Routers reachable",
                "Routers whose metrics the admin app read at the last scrape, of the two "
                "(tokenizer router, detokenizer router).",
                "short",
                [("sum(switchboard_router_up)", "routers up")],
                thresholds=((None, "red"), (2, "green")),
            )
        )
    )


def _traffic_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Traffic"))
        .with_panel(
            timeseries_panel(
                "Messages per route",
                "Messages per second on each route of the fabric, all workers summed "
                "(forward, backward, broadcast, control, detokenize).",
                MESSAGES_PER_SECOND,
                [(rate_by("switchboard_messages_total", "route"), "{{route}}")],
            )
        )
        .with_panel(
            timeseries_panel(
                "Bytes per route",
                "Bytes per second on each route (all frames of each message).",
                "Bps",
                [(rate_by("switchboard_message_bytes_total", "route"), "{{route}}")],
            )
        )
        .with_panel(
            timeseries_panel(
                "HTTP requests per worker",
                "HTTP requests answered per second by each worker, every handler and status.",
                "reqps",
                [(rate_by("switchboard_http_requests_total", "worker"), "{{worker}}")],
            )
        )
        .with_panel(
            timeseries_panel(
                "Generated tokens per worker",
                "Tokens generated per second for each worker's requests.",
                TOKENS_PER_SECOND,
                [(rate_by("switchboard_generation_tokens_total", "worker"), "{{worker}}")],
            )
        )
    )


def _faults_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Drops, rejects and hop latency"))
        .with_panel(
            timeseries_panel(
                "Dropped messages by reason",
                "Messages a router dropped per second (dead or unknown worker, full "
                "backlog, …), by router process and reason.",
                MESSAGES_PER_SECOND,
                [
                    (
                        rate_by("switchboard_dropped_messages_total", "process, reason"),
                        "{{process}}: {{reason}}",
                    )
                ],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Rejected frames by reason",
                "Inbound messages a router refused per second (bad header, bad payload, "
                "wrong kind, …), by router process and reason.",
                MESSAGES_PER_SECOND,
                [
                    (
                        rate_by("switchboard_rejected_frames_total", "process, reason"),
                        "{{process}}: {{reason}}",
                    )
                ],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Hop latency p50 / p99 by route",
                "Time from a message's send to its receipt on each route, median and 99th "
                "percentile (forward: worker → router, detokenize: engine → detokenizer "
                "router, backward: to the worker).",
                "s",
                [
                    (quantile(0.5, HOP, "route"), "p50 {{route}}"),
                    (quantile(0.99, HOP, "route"), "p99 {{route}}"),
                ],
                span=8,
            )
        )
    )


def _workers_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Workers, pause and engine"))
        .with_panel(
            state_panel(
                "Pause state",
                "Generation paused (orange) or running (green) over time.",
                "none",
                [("switchboard_paused", "generation")],
                _paused_mappings(),
                span=24,
                height=4,
            )
        )
        .with_panel(
            timeseries_panel(
                "Workers by state",
                "Registered workers in each state (starting, serving, paused, draining, "
                "drained, dead), stacked.",
                "short",
                [("switchboard_workers", "{{state}}")],
                stacked=True,
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Engine queue",
                "Requests running in the engine, waiting in its queue, and its running capacity.",
                "short",
                [
                    ("switchboard_engine_running_requests", "running"),
                    ("switchboard_engine_waiting_requests", "waiting"),
                    ("switchboard_engine_max_running_requests", "capacity"),
                ],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Router backlog",
                "Messages queued in each router's bounded per-destination backlogs.",
                "short",
                [("switchboard_router_backlog_messages", "{{process}}")],
                span=8,
            )
        )
    )


def overview() -> dashboard.Dashboard:
    """The overview dashboard builder."""
    board = base_dashboard(
        UID,
        "Switchboard / Overview",
        "Traffic per route and worker, drops and rejects, hop latency, pause state, "
        "workers and the engine queue for one Switchboard host.",
    )
    for add_row in (_status_row, _traffic_row, _faults_row, _workers_row):
        board = add_row(board)
    return board
