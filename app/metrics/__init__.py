"""The admin app's ``GET /metrics``: the whole host's metrics in one exposition.

Routers are read over their control sockets at scrape time (:mod:`app.metrics.families`
maps their snapshots); workers and detokenizers write ``prometheus_client`` multiprocess
files that :mod:`app.metrics.exposition` aggregates and merges with the routers'
families; :class:`HostMetrics` does a scrape.
"""

from app.metrics.scrape import HostMetrics

__all__ = ["HostMetrics"]
