"""The latency dashboard (uid ``switchboard-latency``): what a user waits for (time to
first token, inter-token, end-to-end), HTTP duration per handler, the engine's queue and
token usage, and how long pause/continue barriers take."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from dashboards.src.common import base_dashboard, quantile, timeseries_panel

__all__ = ["UID", "latency"]

UID = "switchboard-latency"
TTFT = "switchboard_time_to_first_token_seconds"


def _percentiles(
    histogram: str,
    labels: str = "",
    legend: str = "",
    quantiles: tuple[float, ...] = (0.5, 0.9, 0.99),
) -> list[tuple[str, str]]:
    """One query per quantile of ``histogram`` by ``labels``, named "p50 <legend>", …"""
    suffix = f" {legend}" if legend else ""
    return [(quantile(q, histogram, labels), f"p{round(q * 100)}{suffix}") for q in quantiles]


def _generation_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Generation"))
        .with_panel(
            timeseries_panel(
                "Time to first token",
                "From request arrival to the first generated token, all workers: p50, p90, p99.",
                "s",
                _percentiles(TTFT),
            )
        )
        .with_panel(
            timeseries_panel(
                "Time to first token p99 by worker",
                "99th percentile of time to first token for each worker: one slow worker "
                "stands out here.",
                "s",
                [(quantile(0.99, TTFT, "worker"), "{{worker}}")],
            )
        )
        .with_panel(
            timeseries_panel(
                "Inter-token latency",
                "Between consecutive chunks of a stream, per token of the later chunk, all "
                "workers: p50, p90, p99.",
                "s",
                _percentiles("switchboard_inter_token_latency_seconds"),
            )
        )
        .with_panel(
            timeseries_panel(
                "End-to-end latency",
                "A generation request from arrival to its last token, all workers: p50, p90, p99.",
                "s",
                _percentiles("switchboard_e2e_request_latency_seconds"),
            )
        )
        .with_panel(
            timeseries_panel(
                "HTTP duration p50 / p99 by handler",
                "From request start to the last byte of the response, per route template, "
                "all workers.",
                "s",
                [
                    (
                        quantile(0.5, "switchboard_http_request_duration_seconds", "handler"),
                        "p50 {{handler}}",
                    ),
                    (
                        quantile(0.99, "switchboard_http_request_duration_seconds", "handler"),
                        "p99 {{handler}}",
                    ),
                ],
                span=24,
            )
        )
    )


def _engine_row(board: dashboard.Dashboard) -> dashboard.Dashboard:
    return (
        board.with_row(dashboard.Row("Engine and pause barrier"))
        .with_panel(
            timeseries_panel(
                "Engine requests",
                "Requests running in the engine and waiting in its queue; a growing "
                "waiting line explains rising time to first token.",
                "short",
                [
                    ("switchboard_engine_running_requests", "running"),
                    ("switchboard_engine_waiting_requests", "waiting"),
                ],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Engine token usage",
                "Share of the engine's token capacity in use.",
                "percentunit",
                [("switchboard_engine_token_usage_ratio", "token usage")],
                span=8,
            )
        )
        .with_panel(
            timeseries_panel(
                "Pause barrier time",
                "From broadcasting pause or continue to its answer (all workers "
                "acknowledged, or the timeout), p50 and p99 by operation; points appear "
                "where operations ran.",
                "s",
                _percentiles(
                    "switchboard_pause_barrier_seconds", "operation", "{{operation}}", (0.5, 0.99)
                ),
                span=8,
            )
        )
    )


def latency() -> dashboard.Dashboard:
    """The latency dashboard builder."""
    board = base_dashboard(
        UID,
        "Switchboard / Latency",
        "Time to first token, inter-token and end-to-end latency, HTTP duration, the "
        "engine's queue and token usage, and pause barrier time.",
    )
    for add_row in (_generation_row, _engine_row):
        board = add_row(board)
    return board
