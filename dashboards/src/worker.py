"""The worker drill-down dashboard (uid ``switchboard-worker``): one worker, chosen by
the ``worker`` variable: is it up, what it serves over HTTP, its latencies and its
traffic on each route."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard, timeseries

from dashboards.src.common import (
    MESSAGES_PER_SECOND,
    TOKENS_PER_SECOND,
    base_dashboard,
    quantile,
    rate_by,
    stat_panel,
    timeseries_panel,
    up_down_mappings,
    worker_variable,
)

__all__ = ["UID", "worker"]

UID = "switchboard-worker"
#: The label matcher every query of this dashboard applies.
WORKER = '{worker="$worker"}'


def _status_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Status of $worker"))
        .with_panel(
            stat_panel(
                "Up",
                "Whether the worker is registered and heartbeating (0 once dead or departed).",
                "none",
                [(f"switchboard_worker_up{WORKER}", "up")],
                mappings=up_down_mappings("up", "down"),
            )
        )
        .with_panel(
            stat_panel(
                "Last heartbeat age",
                "Seconds since the router last heard a heartbeat or acknowledgement from "
                "the worker.",
                "s",
                [(f"time() - switchboard_worker_last_heartbeat_timestamp_seconds{WORKER}", "age")],
                thresholds=((None, "green"), (5, "orange"), (15, "red")),
            )
        )
        .with_panel(
            stat_panel(
                "In flight (router view)",
                "Requests in flight as the worker's last heartbeat reported to the router.",
                "short",
                [(f"switchboard_worker_in_flight_requests{WORKER}", "in flight")],
            )
        )
        .with_panel(
            stat_panel(
                "HTTP requests in flight",
                "HTTP requests the worker is handling now.",
                "short",
                [(f"sum(switchboard_http_requests_in_flight{WORKER})", "in flight")],
            )
        )
    )


def _http_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("HTTP"))
        .with_panel(
            timeseries_panel(
                "HTTP requests by handler and status",
                "HTTP requests answered per second by the worker, by route template and "
                "status code.",
                "reqps",
                [
                    (
                        rate_by("switchboard_http_requests_total", "handler, status", WORKER),
                        "{{handler}} {{status}}",
                    )
                ],
            )
        )
        .with_panel(
            timeseries_panel(
                "In flight",
                "HTTP requests being handled now and requests in flight as the router "
                "last heard, over time.",
                "short",
                [
                    (f"sum(switchboard_http_requests_in_flight{WORKER})", "HTTP"),
                    (f"switchboard_worker_in_flight_requests{WORKER}", "router view"),
                ],
            )
        )
    )


def _latency_panel(title: str, description: str, histogram: str) -> timeseries.Panel:
    return timeseries_panel(
        title,
        description,
        "s",
        [
            (quantile(0.5, histogram, selector=WORKER), "p50"),
            (quantile(0.99, histogram, selector=WORKER), "p99"),
        ],
        span=8,
    )


def _latency_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Latency"))
        .with_panel(
            _latency_panel(
                "Time to first token p50 / p99",
                "From request arrival to the first generated token, for this worker.",
                "switchboard_time_to_first_token_seconds",
            )
        )
        .with_panel(
            _latency_panel(
                "Inter-token latency p50 / p99",
                "Between consecutive chunks of a stream, per token, for this worker.",
                "switchboard_inter_token_latency_seconds",
            )
        )
        .with_panel(
            _latency_panel(
                "End-to-end latency p50 / p99",
                "A generation request from arrival to its last token, for this worker.",
                "switchboard_e2e_request_latency_seconds",
            )
        )
    )


def _traffic_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Traffic"))
        .with_panel(
            timeseries_panel(
                "Messages per route",
                "Messages per second for this worker on each route of the fabric.",
                MESSAGES_PER_SECOND,
                [(rate_by("switchboard_messages_total", "route", WORKER), "{{route}}")],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Bytes per route",
                "Bytes per second for this worker on each route.",
                "Bps",
                [(rate_by("switchboard_message_bytes_total", "route", WORKER), "{{route}}")],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Tokens",
                "Prompt tokens received and tokens generated per second for this worker's "
                "generation requests.",
                TOKENS_PER_SECOND,
                [
                    (rate_by("switchboard_prompt_tokens_total", "", WORKER), "prompt"),
                    (rate_by("switchboard_generation_tokens_total", "", WORKER), "generated"),
                ],
                span=8,
            )
        )
    )


def worker() -> dashboard.Dashboard:
    """The worker drill-down dashboard builder."""
    board = base_dashboard(
        UID,
        "Switchboard / Worker",
        "One worker in detail: liveness, HTTP traffic, latencies and fabric traffic.",
    ).with_variable(worker_variable())
    for add_row in (_status_row, _http_row, _latency_row, _traffic_row):
        board = add_row(board)
    return board
