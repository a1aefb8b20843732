"""The dashboards, each a ``grafana-foundation-sdk`` builder, by the file name its JSON is
committed under (``dashboards/json/<name>.json``); the name is the dashboard's uid."""

from __future__ import annotations

from collections.abc import Callable

from grafana_foundation_sdk.builders.dashboard import Dashboard

from dashboards.src import latency, overview, worker

__all__ = ["DASHBOARDS"]

#: uid (and JSON file stem) -> builder factory.
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {
    overview.UID: overview.overview,
    worker.UID: worker.worker,
    latency.UID: latency.latency,
}
